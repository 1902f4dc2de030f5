import { describe, expect, it, jest } from '@jest/globals';
import {
  All,
  Body,
  Controller,
  Delete,
  Get,
  Head,
  HostParam,
  Ip,
  Next,
  Options,
  Patch,
  Post,
  Put,
  Res,
  Search,
  Sse,
} from '@nestjs/common';
import { type DiscoveryService, MetadataScanner, type ModuleRef } from '@nestjs/core';
import { Idempotent, IdempotencyKey } from '../../lib/index.js';
import { IdempotencyExplorer } from '../../lib/nest/idempotency.explorer.js';
import { createProtocol } from '../support/protocol.js';

function explore(controllers: unknown[], moduleRef: Partial<ModuleRef> = {}) {
  const { routes, identities, options, acks } = createProtocol({}, moduleRef);
  const discovery = {
    getControllers: () => controllers.map((metatype) => ({ metatype })),
    getProviders: () => [],
  } as unknown as DiscoveryService;
  return new IdempotencyExplorer(options, discovery, new MetadataScanner(), routes, identities, acks).onModuleInit();
}

class Resolver {
  resolve() {
    return 'scope';
  }
}

@Controller()
class Fine {
  @Post('a')
  @Idempotent({ ttlMs: 5, identity: Resolver })
  a() {
    return 1;
  }

  @Post('b')
  @Idempotent()
  b(@Res({ passthrough: true }) _res: unknown) {
    return 2;
  }

  // Param types 10 and up (@HostParam 10, @Ip 11) are not @Res() (1) or @Next() (2).
  @Post('e')
  @Idempotent()
  e(@Ip() _ip: string, @HostParam() _host: unknown, @Body() _body: unknown) {
    return 5;
  }

  // Not idempotent: anything goes.
  @Post('c')
  c(@Res() _res: unknown) {
    return 3;
  }

  @Sse('d')
  d() {
    return 4;
  }
}

describe('IdempotencyExplorer', () => {
  it('accepts replayable handlers and builds their identity resolvers at startup', async () => {
    const get = jest.fn((_type: unknown, _options: unknown) => new Resolver());
    await expect(explore([Fine, undefined, {}], { get: get as never })).resolves.toBeUndefined();
    expect(get).toHaveBeenCalledWith(Resolver, { strict: false });
  });

  it('refuses @Res() and @Next() without passthrough, naming the handler', async () => {
    @Controller()
    class WithRes {
      @Post()
      @Idempotent()
      pay(@Res() _res: unknown) {
        return 1;
      }
    }
    @Controller()
    class WithNext {
      @Post()
      @Idempotent()
      pay(@Next() _next: unknown) {
        return 1;
      }
    }
    const message = ': @Res()/@Next() without { passthrough: true } leaves the response to the handler; return the body instead';
    await expect(explore([WithRes])).rejects.toThrow(`@Idempotent() on WithRes.pay()${message}`);
    await expect(explore([WithNext])).rejects.toThrow(`@Idempotent() on WithNext.pay()${message}`);
  });

  it('refuses @IdempotencyKey() on a route without @Idempotent(), and takes it with one', async () => {
    @Controller()
    class Payments {
      @Post('a')
      @Idempotent()
      a(@IdempotencyKey() key: string) {
        return key;
      }

      @Post('b')
      b(@Body() body: unknown) {
        return body;
      }

      @Post('c')
      c(@Body() _body: unknown, @IdempotencyKey() key: string) {
        return key;
      }
    }
    await expect(explore([Payments])).rejects.toThrow(
      '@IdempotencyKey() on Payments.c(): the key is read on @Idempotent() routes only, so here it would be undefined and nothing deduplicated: add @Idempotent() to the route, or remove @IdempotencyKey()',
    );
    Idempotent()(Payments.prototype, 'c', Object.getOwnPropertyDescriptor(Payments.prototype, 'c')!);
    await expect(explore([Payments])).resolves.toBeUndefined();
  });

  it('refuses @Sse()', async () => {
    @Controller()
    class Events {
      @Sse('events')
      @Idempotent()
      stream() {
        return 1;
      }
    }
    await expect(explore([Events])).rejects.toThrow(
      '@Idempotent() on Events.stream(): an @Sse() stream cannot be stored and replayed',
    );
  });

  it('refuses safe methods (GET, HEAD, OPTIONS, SEARCH), accepts unsafe ones and @All()', async () => {
    for (const [, method] of [
      ['GET', Get],
      ['HEAD', Head],
      ['OPTIONS', Options],
      ['SEARCH', Search],
    ] as const) {
      @Controller()
      class Safe {
        @method('x')
        @Idempotent()
        read() {
          return 1;
        }
      }
      await expect(explore([Safe])).rejects.toThrow(
        '@Idempotent() on Safe.read(): GET, HEAD, OPTIONS and other safe methods change nothing and need no key; use it on POST, PUT, PATCH or DELETE',
      );
    }
    @Controller()
    class Unsafe {
      @Post('a') @Idempotent() a() {}
      @Put('b') @Idempotent() b() {}
      @Patch('c') @Idempotent() c() {}
      @Delete('d') @Idempotent() d() {}
      @All('e') @Idempotent() e() {}
    }
    await expect(explore([Unsafe])).resolves.toBeUndefined();
  });

  it('validates route options with the handler named', async () => {
    @Controller()
    class Bad {
      @Post()
      @Idempotent({ ttlMs: 0 })
      pay() {
        return 1;
      }
    }
    await expect(explore([Bad])).rejects.toThrow(
      '@Idempotent() on Bad.pay(): ttlMs must be an integer from 1 to 31536000000, got 0',
    );
  });

  it('fails the start when a resolver class cannot be built', async () => {
    @Controller()
    class NeedsResolver {
      @Post()
      @Idempotent({ identity: Resolver })
      pay() {
        return 1;
      }
    }
    const moduleRef = {
      get: () => {
        throw new Error('unknown');
      },
      create: () => Promise.reject(missing),
    };
    const missing = new Error('missing dependency');
    const failure = await explore([NeedsResolver], moduleRef as never).catch((err: Error) => err);
    expect(failure).toMatchObject({ message: expect.stringContaining('missing dependency'), cause: missing });
  });
});

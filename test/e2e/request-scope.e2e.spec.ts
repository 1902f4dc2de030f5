import { describe, expect, it } from '@jest/globals';
import { Body, Controller, Inject, Injectable, Post, Scope } from '@nestjs/common';
import { REQUEST } from '@nestjs/core';
import request from 'supertest';
import { Idempotent, type IdempotencyIdentityResolver, IdempotencyModule } from '../../lib/index.js';
import { ADAPTERS, startApp, useApps } from '../support/app.js';
import { Runs } from '../support/fixtures.js';

type Req = { headers: Record<string, string> };

/** A REQUEST-scoped resolver: reads the tenant from the request it was built for. */
@Injectable({ scope: Scope.REQUEST })
class RequestTenant implements IdempotencyIdentityResolver {
  constructor(@Inject(REQUEST) private readonly req: Req) {}
  resolve(req: Req): string {
    if (req !== this.req) throw new Error('resolved for another request');
    return this.req.headers['x-tenant'];
  }
}

/** A request-scoped service, and a default-scoped resolver that depends on it (so it is request-scoped too). */
@Injectable({ scope: Scope.REQUEST })
class TenantContext {
  constructor(@Inject(REQUEST) readonly req: Req) {}
}
@Injectable()
class ContextTenant implements IdempotencyIdentityResolver {
  constructor(private readonly context: TenantContext) {}
  resolve(): string {
    return this.context.req.headers['x-tenant'];
  }
}

@Controller()
class ScopedController {
  constructor(private readonly runs: Runs) {}

  @Post('own')
  @Idempotent({ identity: RequestTenant })
  own(@Body() body: object) {
    return { run: this.runs.hit('own'), body };
  }

  @Post('dependent')
  @Idempotent({ identity: ContextTenant })
  dependent(@Body() body: object) {
    return { run: this.runs.hit('dependent'), body };
  }
}

/** A resolver class no module provides, whose dependency none provides either. */
@Injectable()
class Unbuildable implements IdempotencyIdentityResolver {
  constructor(readonly missing: TenantContext) {}
  resolve(): string {
    return 'x';
  }
}
@Controller()
class BrokenController {
  @Post('broken')
  @Idempotent({ identity: Unbuildable })
  broken() {
    return 1;
  }
}

// H33 (issue 22 item 17): a REQUEST-scoped identity resolver (or one injecting a request-scoped
// provider) failed the start with Nest's generic DI text naming IdempotencyModule.
describe.each(ADAPTERS)('request-scoped identity resolvers on %s', (adapter) => {
  const start = useApps();

  it.each(['own', 'dependent'])(
    '%s: resolved for each request, in its DI context: tenants keep their keys apart',
    async (path) => {
      const app = await start(adapter, {
        imports: [IdempotencyModule.forRoot()],
        controllers: [ScopedController],
        providers: [Runs, RequestTenant, TenantContext, ContextTenant],
      });
      const post = (tenant: string) =>
        request(app.getHttpServer()).post(`/${path}`).set('x-tenant', tenant).set('Idempotency-Key', 'K').send({ a: 1 });
      const acme = await post('acme');
      const globex = await post('globex');
      expect([acme.status, globex.status]).toEqual([201, 201]);
      expect([acme.body.run, globex.body.run]).toEqual([1, 2]);
      const again = await post('acme');
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body).toEqual(acme.body);
      expect(app.get(Runs).of(path)).toBe(2);
    },
  );

  it('a resolver class that cannot be built fails the start naming the route and the identity option', async () => {
    await expect(startApp(adapter, { imports: [IdempotencyModule.forRoot()], controllers: [BrokenController] })).rejects.toThrow(
      /^@Idempotent\(\) on BrokenController\.broken\(\) \(its identity option\): the identity resolver Unbuildable cannot be built: .*Register it as a provider/s,
    );
  });
});

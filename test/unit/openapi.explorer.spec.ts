import { describe, expect, it } from '@jest/globals';
import { Controller, Logger, Post } from '@nestjs/common';
import { type DiscoveryService, MetadataScanner } from '@nestjs/core';
import { Idempotent } from '../../lib/index.js';
import { loadSwagger, OpenApiExplorer, type SwaggerApi } from '../../lib/ops/openapi/openapi.explorer.js';
import { RouteOptionsRegistry } from '../../lib/nest/route-options.registry.js';
import { spyOnLogger } from '../support/logger.js';
import { createProtocol } from '../support/protocol.js';

@Controller()
class Pay {
  @Post()
  @Idempotent()
  create() {
    return {};
  }
}

@Controller()
class Plain {
  @Post()
  create() {
    return {};
  }
}

const notFound = (name: string) =>
  Object.assign(new Error(`Cannot find package '${name}' imported from /app/node_modules/@nestjs/swagger/dist/index.js`), {
    code: 'ERR_MODULE_NOT_FOUND',
  });

describe('loadSwagger', () => {
  const logs = spyOnLogger();
  const logger = new Logger('Idempotency');

  it('is undefined, quietly, when @nestjs/swagger is not installed', async () => {
    expect(await loadSwagger(logger, () => Promise.reject(notFound('@nestjs/swagger')))).toBeUndefined();
    expect(logs.warnings).not.toHaveBeenCalled();
  });

  it.each([
    ['a dependency of it is missing', notFound('js-yaml'), "Cannot find package 'js-yaml' imported from"],
    ['it throws while loading', new Error('boom'), 'boom'],
    ['it throws a non-Error', 'text', 'text'],
  ])('is undefined, with a warning naming why, when %s', async (_name, thrown, reason) => {
    // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- a module may throw anything
    expect(await loadSwagger(logger, () => Promise.reject(thrown))).toBeUndefined();
    expect(logs.warnings).toHaveBeenCalledTimes(1);
    expect(String(logs.warnings.mock.calls[0][0])).toContain(
      `@nestjs/swagger is installed but could not be loaded, so @Idempotent() routes are not documented in OpenAPI: ${reason}`,
    );
  });

  it('hands back the module it loaded', async () => {
    const swagger = { DECORATORS: {} } as SwaggerApi;
    expect(await loadSwagger(logger, () => Promise.resolve(swagger))).toBe(swagger);
  });
});

describe('OpenApiExplorer.explore', () => {
  spyOnLogger();
  const explorer = (controllers: object[], options: Parameters<typeof createProtocol>[0], load: () => Promise<SwaggerApi>) => {
    const resolved = createProtocol(options).options;
    const discovery = { getControllers: () => controllers.map((metatype) => ({ metatype })) } as unknown as DiscoveryService;
    return new OpenApiExplorer(resolved, discovery, new MetadataScanner(), new RouteOptionsRegistry(resolved), load);
  };
  const loads = () => {
    const calls: number[] = [];
    const load = () => {
      calls.push(1);
      return import('@nestjs/swagger') as Promise<SwaggerApi>;
    };
    return { calls, load };
  };

  it('documents every @Idempotent() handler with Swagger loaded, and counts them', async () => {
    const { calls, load } = loads();
    expect(await explorer([Pay, Plain], {}, load).explore()).toBe(1);
    expect(calls).toHaveLength(1);
  });

  it('does not load Swagger without @Idempotent() handlers, or with openApi: false', async () => {
    const { calls, load } = loads();
    expect(await explorer([Plain], {}, load).explore()).toBe(0);
    expect(await explorer([Pay], { openApi: false }, load).explore()).toBe(0);
    expect(calls).toHaveLength(0);
  });

  it('documents nothing when Swagger is not installed', async () => {
    expect(await explorer([Pay], {}, () => Promise.reject(notFound('@nestjs/swagger'))).explore()).toBe(0);
  });
});

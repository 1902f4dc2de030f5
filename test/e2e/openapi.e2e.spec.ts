import { afterEach, describe, expect, it } from '@jest/globals';
import { Body, Controller, type DynamicModule, HttpCode, type INestApplication, Param, Post, Put } from '@nestjs/common';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import {
  ApiHeader,
  ApiOperation,
  ApiProperty,
  ApiResponse,
  DocumentBuilder,
  type OpenAPIObject,
  SwaggerModule,
} from '@nestjs/swagger';
import { Test } from '@nestjs/testing';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import type { IdempotencyModuleRootOptions } from '../../lib/shared/interfaces/idempotency-module-options.interface.js';
import { ADAPTERS, type AdapterName } from '../support/app.js';

class Payment {
  @ApiProperty()
  id!: string;
}

@Controller()
class DocumentedController {
  @Post('payments')
  @Idempotent()
  create(@Body() body: unknown) {
    return { id: 'p1', body };
  }

  @Put('items/:id')
  @Idempotent({ ttlMs: 3_600_000 })
  @ApiOperation({ summary: 'Replace an item', description: 'Replaces the item.' })
  @ApiResponse({
    status: 200,
    type: Payment,
    description: 'The item.',
    headers: { ETag: { description: 'version', schema: { type: 'string' } } },
  })
  @ApiResponse({ status: 400, description: 'Validation failed.' })
  @ApiResponse({ status: 404, description: 'No such item.' })
  @ApiHeader({ name: 'idempotency-key', description: 'hand-written', required: false })
  @ApiHeader({ name: 'X-Tenant', description: 'tenant' })
  put(@Param('id') id: string) {
    return { id };
  }

  @Post('optional')
  @HttpCode(202)
  @Idempotent({ missingHeader: 'pass-through' })
  optional() {
    return {};
  }

  @Post('accepted')
  @Idempotent()
  @ApiResponse({ status: 202, description: 'Accepted.' })
  accepted() {
    return {};
  }

  @Post('ranged')
  @Idempotent()
  @ApiResponse({ status: '2XX', description: 'Done.' })
  ranged() {
    return {};
  }

  @Put('replace/:id')
  @Idempotent()
  replace() {
    return {};
  }

  @Post('plain')
  plain() {
    return {};
  }
}

const apps: INestApplication[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((a) => a.close()));
});

/**
 * The document as an application builds it: created, not initialised, as most `main.ts` files do.
 * `registration` is the module as imported (forRoot() options, or a forRootAsync() module).
 */
async function documentOf(
  adapter: AdapterName,
  registration: IdempotencyModuleRootOptions | DynamicModule = {},
  configure: (app: INestApplication) => void = () => undefined,
): Promise<OpenAPIObject> {
  const idempotency = 'module' in registration ? registration : IdempotencyModule.forRoot(registration);
  const moduleRef = await Test.createTestingModule({ imports: [idempotency], controllers: [DocumentedController] }).compile();
  const app =
    adapter === 'express'
      ? moduleRef.createNestApplication({ logger: false })
      : moduleRef.createNestApplication(new FastifyAdapter(), { logger: false });
  apps.push(app);
  configure(app);
  return SwaggerModule.createDocument(app, new DocumentBuilder().setTitle('t').build());
}

const KEY_SCHEMA = {
  type: 'string',
  minLength: 1,
  maxLength: 255,
  pattern: '^[^\\u0000-\\u0020\\u007F]+$',
  example: '8e03978e-40d5-43e8-bc93-6894a57f9324',
};
const RETRY_AFTER = {
  description: 'Seconds to wait before retrying with the same key.',
  schema: { type: 'integer', minimum: 0 },
};
const REPLAYED = {
  description: 'Present (`true`) when this is the stored response of an earlier request with the same key, replayed.',
  schema: { type: 'string', enum: ['true'] },
};
const JSON_ERROR = { type: 'object', required: ['error'], properties: { error: { type: 'string' } } };

describe.each(ADAPTERS)('OpenAPI document on %s', (adapter) => {
  it('documents the key header, the policy with its expiry, the four errors and the replay header on a bare route', async () => {
    const doc = await documentOf(adapter);
    const op = doc.paths['/payments'].post!;
    expect(op.parameters).toEqual([
      {
        name: 'Idempotency-Key',
        in: 'header',
        required: true,
        description:
          'Unique per operation, the same on every retry of it, for 1 day; a UUID does. A Structured Field String ("…") is the same key unquoted.',
        schema: { ...KEY_SCHEMA, example: '8e03978e-40d5-43e8-bc93-6894a57f9324' },
      },
    ]);
    expect(op.description).toBe(
      '**Idempotent** ([IETF Idempotency-Key draft](https://datatracker.ietf.org/doc/draft-ietf-httpapi-idempotency-key-header/)): ' +
        'send the `Idempotency-Key` header with a new unique value per operation, and the same value on every retry of it. ' +
        'A retry after the first request finished gets its stored response again, marked `Idempotent-Replayed: true`, without running it twice; ' +
        'while the first still runs, 409; the same key with a different request, 422. Keys expire 1 day after the response is stored.',
    );
    expect(op.responses).toEqual({
      201: { description: '', headers: { 'Idempotent-Replayed': REPLAYED } },
      400: {
        description: 'the key is missing, malformed, or too long',
        headers: {},
        content: { 'application/json': { schema: JSON_ERROR, example: { error: 'idempotency-key header is required' } } },
      },
      409: {
        description: 'a request with this key is still running: retry after Retry-After seconds with the same key',
        headers: { 'Retry-After': RETRY_AFTER },
        content: { 'application/json': { schema: JSON_ERROR, example: { error: 'idempotency-key in-flight; retry shortly' } } },
      },
      422: {
        description: 'this key was already used for a different request',
        headers: {},
        content: {
          'application/json': {
            schema: JSON_ERROR,
            example: { error: 'idempotency-key was already used for a different request' },
          },
        },
      },
      503: {
        description: 'the idempotency store is unavailable: retry after Retry-After seconds with the same key',
        headers: { 'Retry-After': RETRY_AFTER },
        content: {
          'application/json': { schema: JSON_ERROR, example: { error: 'idempotency store unavailable; retry shortly' } },
        },
      },
    });
    // A route without @Idempotent() is left as Swagger makes it.
    expect(doc.paths['/plain'].post).toMatchObject({ parameters: [], responses: { 201: { description: '' } } });
    expect(doc.paths['/plain'].post!.description).toBeUndefined();
  });

  it('keeps what the application documented: its own responses, headers and description, its hand-written key header replaced', async () => {
    const op = (await documentOf(adapter)).paths['/items/{id}'].put!;
    expect(op.summary).toBe('Replace an item');
    expect(op.description).toMatch(
      /^Replaces the item\.\n\n\*\*Idempotent\*\* .* Keys expire 1 hour after the response is stored\.$/,
    );
    const headers = op.parameters!.filter((p) => 'in' in p && p.in === 'header');
    expect(headers.map((p) => 'name' in p && p.name)).toEqual(expect.arrayContaining(['X-Tenant', 'Idempotency-Key']));
    expect(headers).toHaveLength(2);
    expect(headers.find((p) => 'name' in p && p.name === 'Idempotency-Key')).toMatchObject({
      required: true,
      schema: KEY_SCHEMA,
    });
    expect(op.parameters!.some((p) => 'in' in p && p.in === 'path')).toBe(true);
    const responses = op.responses as Record<string, { description: string; headers?: object; content?: object }>;
    expect(responses[200]).toEqual({
      description: 'The item.',
      headers: { 'Idempotent-Replayed': REPLAYED, ETag: { description: 'version', schema: { type: 'string' } } },
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Payment' } } },
    });
    expect(responses[201]).toBeUndefined();
    expect(responses[400]).toEqual({
      description: 'Validation failed.\n\nthe key is missing, malformed, or too long',
      headers: {},
    });
    expect(responses[404]).toEqual({ description: 'No such item.' });
    expect(Object.keys(responses).sort()).toEqual(['200', '400', '404', '409', '422', '503']);
  });

  it('an optional key (pass-through) is not required; @HttpCode() names the success response', async () => {
    const op = (await documentOf(adapter)).paths['/optional'].post!;
    expect(op.parameters).toEqual([expect.objectContaining({ name: 'Idempotency-Key', required: false })]);
    expect(op.description).toContain('(optional: without it the request runs without deduplication)');
    expect(Object.keys(op.responses).sort()).toEqual(['202', '400', '409', '422', '503']);
    expect((op.responses[400] as { description: string }).description).toBe('the key is malformed, or too long');
    expect((op.responses[400] as { content: object }).content).toEqual({
      'application/json': { schema: JSON_ERROR, example: { error: 'idempotency-key exceeds 255 characters' } },
    });
  });

  it('follows the options: problem+json bodies, header names, the key echo, the body flag, errorBody', async () => {
    const doc = await documentOf(adapter, {
      errorFormat: 'problem+json',
      problemTypeBaseUrl: 'https://api.example.com/problems/',
      headerName: 'X-Request-Key',
      maxKeyLength: 64,
      replayedHeader: 'x-replayed',
      replayFlag: 'header-and-body',
      echoKeyHeader: true,
      ttlMs: 90_000,
    });
    const op = doc.paths['/payments'].post!;
    expect(op.parameters).toEqual([expect.objectContaining({ name: 'X-Request-Key', schema: { ...KEY_SCHEMA, maxLength: 64 } })]);
    expect(op.description).toContain('send the `X-Request-Key` header');
    expect(op.description).toContain('marked `X-Replayed: true`');
    expect(op.description).toContain('Keys expire 90 seconds after');
    expect(op.description).toMatch(/A replayed JSON object body has `"replayed": true` added\.$/);
    const echo = { description: "The request's key, as sent.", schema: { type: 'string' } };
    expect(op.responses[201]).toEqual({ description: '', headers: { 'X-Request-Key': echo, 'X-Replayed': REPLAYED } });
    expect(op.responses[409]).toEqual({
      description: 'a request with this key is still running: retry after Retry-After seconds with the same key',
      headers: { 'Retry-After': RETRY_AFTER, 'X-Request-Key': echo },
      content: {
        'application/problem+json': {
          schema: {
            type: 'object',
            required: ['type', 'title', 'status', 'detail'],
            properties: {
              type: { type: 'string', format: 'uri-reference' },
              title: { type: 'string' },
              status: { type: 'integer' },
              detail: { type: 'string' },
            },
          },
          example: {
            type: 'https://api.example.com/problems/key-in-flight',
            title: 'A request is outstanding for this Idempotency-Key',
            status: 409,
            detail: 'x-request-key in-flight; retry shortly',
          },
        },
      },
    });
    const example = (status: number) =>
      (op.responses[status] as { content: Record<string, { example: { type: string } }> }).content['application/problem+json']
        .example.type;
    expect([400, 409, 422, 503].map(example)).toEqual([
      'https://api.example.com/problems/key-missing',
      'https://api.example.com/problems/key-in-flight',
      'https://api.example.com/problems/key-reused',
      'https://api.example.com/problems/store-unavailable',
    ]);
    const stripe = await documentOf(adapter, { errorBody: ({ message }) => ({ error: { type: 'idempotency_error', message } }) });
    expect((stripe.paths['/payments'].post!.responses[422] as { content: object }).content).toEqual({
      'application/json': {
        example: { error: { type: 'idempotency_error', message: 'idempotency-key was already used for a different request' } },
      },
    });
  });

  it('documents each application afresh from the decorators (another module, other options), never twice', async () => {
    await documentOf(adapter, { replayedHeader: false, ttlMs: 60_000 });
    const doc = await documentOf(adapter);
    const op = doc.paths['/payments'].post!;
    expect(op.parameters).toHaveLength(1);
    expect(op.description!.match(/\*\*Idempotent\*\*/g)).toHaveLength(1);
    expect(op.description).toContain('Keys expire 1 day after');
    expect(op.responses[201]).toEqual({ description: '', headers: { 'Idempotent-Replayed': REPLAYED } });
    const put = doc.paths['/items/{id}'].put!;
    expect((put.responses[400] as { description: string }).description).toBe(
      'Validation failed.\n\nthe key is missing, malformed, or too long',
    );
  });

  it('documents with options from forRootAsync() too, and under a global prefix', async () => {
    const doc = await documentOf(
      adapter,
      IdempotencyModule.forRootAsync({ useFactory: async () => ({ ttlMs: 7_200_000, maxKeyLength: 36 }) }),
      (app) => app.setGlobalPrefix('api'),
    );
    const op = doc.paths['/api/payments'].post!;
    expect(op.parameters).toEqual([
      expect.objectContaining({ name: 'Idempotency-Key', schema: { ...KEY_SCHEMA, maxLength: 36 } }),
    ]);
    expect(op.description).toContain('Keys expire 2 hours after the response is stored.');
  });

  it('a declared success status, or range, is the one that gets the replay header; no default is added beside it', async () => {
    const doc = await documentOf(adapter);
    const accepted = doc.paths['/accepted'].post!.responses;
    expect(Object.keys(accepted).sort()).toEqual(['202', '400', '409', '422', '503']);
    expect(accepted[202]).toEqual({ description: 'Accepted.', headers: { 'Idempotent-Replayed': REPLAYED } });
    const ranged = doc.paths['/ranged'].post!.responses;
    expect(Object.keys(ranged).sort()).toEqual(['2XX', '400', '409', '422', '503']);
    expect(ranged['2XX']).toEqual({ description: 'Done.', headers: { 'Idempotent-Replayed': REPLAYED } });
    // Undeclared, the success is the one Nest answers: 201 for POST, 200 for any other method.
    const replace = doc.paths['/replace/{id}'].put!.responses;
    expect(Object.keys(replace).sort()).toEqual(['200', '400', '409', '422', '503']);
    expect(replace[200]).toEqual({ description: '', headers: { 'Idempotent-Replayed': REPLAYED } });
  });

  it('adds nothing with openApi: false, also after another application documented the same controller', async () => {
    await documentOf(adapter, { echoKeyHeader: true });
    const doc = await documentOf(adapter, { openApi: false });
    const op = doc.paths['/payments'].post!;
    expect(op.parameters).toEqual([]);
    expect(op.description).toBeUndefined();
    expect(op.responses).toEqual({ 201: { description: '' } });
    expect(doc.paths['/items/{id}'].put!.parameters!.filter((p) => 'in' in p && p.in === 'header')).toHaveLength(2);
  });
});

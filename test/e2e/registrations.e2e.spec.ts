import { afterEach, describe, expect, it } from '@jest/globals';
import { Body, Controller, type INestApplication, Module, Post } from '@nestjs/common';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { ADAPTERS } from '../support/app.js';

@Controller('a')
class AController {
  @Post()
  @Idempotent()
  create(@Body() body: object) {
    return body;
  }
}

@Controller('b')
class BController {
  @Post()
  @Idempotent()
  create(@Body() body: object) {
    return body;
  }
}

/** Both registrations are global (the default): each feature module's own import is the one its controllers use. */
@Module({ imports: [IdempotencyModule.forRoot({ headerName: 'x-a-key', ttlMs: 1_000 })], controllers: [AController] })
class FeatureA {}

@Module({ imports: [IdempotencyModule.forRoot({ headerName: 'x-b-key' })], controllers: [BController] })
class FeatureB {}

const apps: INestApplication[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((a) => a.close()));
});

// H28 (issue 22 item 10): every route was documented with the last registration's header, and a
// route whose keys expire after 1 s said "1 day".
describe.each(ADAPTERS)('two registrations in two feature modules on %s', (adapter) => {
  const build = async () => {
    const moduleRef = await Test.createTestingModule({ imports: [FeatureA, FeatureB] }).compile();
    const app =
      adapter === 'express'
        ? moduleRef.createNestApplication({ logger: false })
        : moduleRef.createNestApplication(new FastifyAdapter(), { logger: false });
    apps.push(app);
    return app;
  };

  it('documents each route with the options of the registration that serves it', async () => {
    const document = SwaggerModule.createDocument(await build(), new DocumentBuilder().setTitle('t').build());
    const headerOf = (path: string) =>
      (document.paths[path].post!.parameters as { name: string; in: string }[])
        .filter((p) => p.in === 'header')
        .map((p) => p.name);
    expect(headerOf('/a')).toEqual(['X-A-Key']);
    expect(headerOf('/b')).toEqual(['X-B-Key']);
    expect(document.paths['/a'].post!.description).toContain('1 second');
    expect(document.paths['/b'].post!.description).toContain('1 day');
  });

  it("serves each controller with its own feature module's registration at run time too", async () => {
    const app = await build();
    await app.init();
    if (adapter === 'fastify') await (app.getHttpAdapter().getInstance() as { ready(): Promise<void> }).ready();
    const server = app.getHttpServer();
    expect((await request(server).post('/a').set('x-a-key', 'k').send({ a: 1 })).status).toBe(201);
    expect((await request(server).post('/a').set('x-b-key', 'k').send({ a: 1 })).status).toBe(400);
    expect((await request(server).post('/b').set('x-b-key', 'k').send({ b: 1 })).status).toBe(201);
    expect((await request(server).post('/b').set('x-a-key', 'k').send({ b: 1 })).status).toBe(400);
  });
});

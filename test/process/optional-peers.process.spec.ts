import { describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { built } from '../support/build.js';
import { pay, Pod } from '../support/pod.js';

built('dist', '.build');

const BLOCK = ['--import', './test/support/block-peers.mjs'];

/**
 * Each optional peer and the built files that may name it: the store that loads it on demand. The
 * transactions port takes the application's TransactionHost, so nothing names nestjs-cls at all.
 */
const PEERS: { name: string; loaders: string[]; specifier?: string }[] = [
  { name: 'ioredis', loaders: ['stores/redis/redis.connection.js'] },
  { name: 'pg', loaders: ['stores/postgres/postgres.pool.js'] },
  // mysql2's promise API is a subpath of it.
  { name: 'mysql2', loaders: ['stores/mysql/mysql.pool.js'], specifier: 'mysql2/promise' },
  { name: 'better-sqlite3', loaders: ['stores/sqlite/sqlite.store.js'] },
  { name: 'nestjs-cls', loaders: [] },
  { name: '@nestjs-cls/transactional', loaders: [] },
  { name: 'typeorm', loaders: [] },
  { name: '@nestjs/swagger', loaders: ['ops/openapi/openapi.explorer.js'] },
  { name: '@opentelemetry/api', loaders: ['core/events/telemetry.js'] },
  // The health indicator returns Terminus's result shape: it never loads Terminus.
  { name: '@nestjs/terminus', loaders: [] },
];

function jsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? jsFiles(join(dir, e.name)) : e.name.endsWith('.js') ? [join(dir, e.name)] : [],
  );
}

function run(script: string, env: NodeJS.ProcessEnv = {}): string {
  return execFileSync(process.execPath, [...BLOCK, '--input-type=module', '-e', script], {
    encoding: 'utf8',
    stdio: 'pipe',
    env: { ...process.env, ...env },
  });
}

describe('ioredis, pg, mysql2, better-sqlite3, nestjs-cls, TypeORM, @nestjs/swagger, @opentelemetry/api and @nestjs/terminus are optional', () => {
  it.each(PEERS)('only $loaders name $name, and load it on demand', ({ name, loaders, specifier = name }) => {
    const all = jsFiles('dist');
    expect(all.length).toBeGreaterThan(10);
    const naming = all
      // An import, a dynamic import or a require of it; doc comments may name it.
      .filter((f) => new RegExp(`(from\\s*|import\\(\\s*|require\\(\\s*)['"]${name}['"/]`).test(readFileSync(f, 'utf8')))
      .map((f) => relative('dist', f));
    expect(naming).toEqual(loaders);
    for (const loader of loaders) {
      const source = readFileSync(join('dist', loader), 'utf8');
      expect(source).not.toMatch(new RegExp(`^\\s*import[^(]*['"]${name}['"/]`, 'm'));
      expect(source).toContain(`import('${specifier}')`);
    }
  });

  it('the blocking hook really hides them', () => {
    for (const { name } of PEERS) expect(() => run(`await import('${name}')`)).toThrow(`Cannot find package '${name}'`);
  });

  it('the package boots on InMemoryStore with none of them installed', () => {
    const out = run(`
      import 'reflect-metadata';
      import { NestFactory } from '@nestjs/core';
      import { IdempotencyHealthIndicator, IdempotencyModule, InMemoryStore } from './dist/index.js';
      import { IdempotencyService } from './dist/core/idempotency.service.js';
      const app = await NestFactory.createApplicationContext(IdempotencyModule.forRoot(), { logger: false });
      const service = app.get(IdempotencyService);
      const claim = await service.options.store.claim('k', { owner: 'o', fingerprint: 'f', leaseMs: 1000 });
      const health = await app.get(IdempotencyHealthIndicator).isHealthy('idempotency');
      console.log(service.options.store instanceof InMemoryStore, claim.state, health.idempotency.status);
      await app.close();
    `);
    expect(out.trim()).toBe('true claimed up');
  });

  it.each([
    [
      'PostgresStore',
      `new PostgresStore({ connectionString: 'postgres://127.0.0.1:1/x' })`,
      'PostgresStore needs the "pg" package: npm install pg@8',
    ],
    [
      'MySqlStore',
      `new MySqlStore({ uri: 'mysql://127.0.0.1:1/x' })`,
      'MySqlStore needs the "mysql2" package: npm install mysql2@3',
    ],
    [
      'SqliteStore',
      `new SqliteStore({ filename: ':memory:' })`,
      'SqliteStore needs the "better-sqlite3" package: npm install better-sqlite3@12',
    ],
    [
      'RedisStore',
      `new RedisStore({ url: 'redis://127.0.0.1:1' })`,
      'RedisStore needs the "ioredis" package: npm install ioredis@5',
    ],
  ])('%s without its driver fails the start with the package and the install line', (name, store, message) => {
    expect(() =>
      run(`
        import 'reflect-metadata';
        import { NestFactory } from '@nestjs/core';
        import { IdempotencyModule, ${name} } from './dist/index.js';
        const store = ${store};
        await NestFactory.createApplicationContext(IdempotencyModule.forRoot({ store }), { logger: false, abortOnError: false });
      `),
    ).toThrow(message);
  });

  it.each([
    ['@nestjs/swagger', 'not installed', { BLOCK_PEERS: '@nestjs/swagger' }, []],
    [
      '@nestjs/swagger',
      'installed but failing to load',
      { BLOCK_PEERS: '', BREAK_PEERS: '@nestjs/swagger' },
      [
        'WARN @nestjs/swagger is installed but could not be loaded, so @Idempotent() routes are not documented in OpenAPI: @nestjs/swagger is broken (by the test)',
      ],
    ],
    ['@opentelemetry/api', 'not installed', { BLOCK_PEERS: '@opentelemetry/api' }, []],
    [
      '@opentelemetry/api',
      'installed but failing to load',
      { BLOCK_PEERS: '', BREAK_PEERS: '@opentelemetry/api' },
      [
        'WARN @opentelemetry/api is installed but could not be loaded, so no idempotency metrics or span attributes are recorded: @opentelemetry/api is broken (by the test)',
      ],
    ],
  ])('with %s %s, an application with @Idempotent() routes starts and serves them', (_peer, _name, env, warnings) => {
    const out = run(
      `
      import 'reflect-metadata';
      import { Controller, Module, Post } from '@nestjs/common';
      import { NestFactory } from '@nestjs/core';
      import { IdempotencyModule, Idempotent } from './dist/index.js';
      class Pay { create() { return { ok: true }; } }
      const descriptor = Object.getOwnPropertyDescriptor(Pay.prototype, 'create');
      Idempotent()(Pay.prototype, 'create', descriptor);
      Post()(Pay.prototype, 'create', descriptor);
      Controller('pay')(Pay);
      class App {}
      Module({ imports: [IdempotencyModule.forRoot()], controllers: [Pay] })(App);
      const warn = (m) => console.log('WARN ' + m);
      const app = await NestFactory.create(App, { logger: { log() {}, error: warn, warn } });
      await app.listen(0, '127.0.0.1');
      const { port } = app.getHttpServer().address();
      const post = () => fetch('http://127.0.0.1:' + port + '/pay', { method: 'POST', headers: { 'idempotency-key': 'k' } });
      const first = await post();
      const again = await post();
      console.log(first.status, again.headers.get('idempotent-replayed'));
      await app.close();
    `,
      env,
    );
    expect(out.trim().split('\n')).toEqual([...warnings, '201 true']);
  });

  it('the sample app runs on InMemoryStore without ioredis, pg, nestjs-cls, TypeORM and @nestjs/swagger', async () => {
    const pod = await Pod.start({
      database: ':memory:',
      nodeArgs: BLOCK,
      env: { BLOCK_PEERS: 'ioredis,pg,nestjs-cls,@nestjs-cls/transactional,typeorm,@nestjs/swagger', STORE: 'memory' },
    });
    try {
      const first = await pay(pod.base, 'no-peers');
      const retry = await pay(pod.base, 'no-peers');
      expect(first.status).toBe(201);
      expect(retry).toEqual({ status: 201, text: first.text, replayed: true });
    } finally {
      await pod.kill();
    }
  });
});

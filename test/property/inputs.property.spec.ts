import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, type INestApplication, Param, Post, Put } from '@nestjs/common';
import fc from 'fast-check';
import request from 'supertest';
import { IdempotencyModule, Idempotent, InMemoryStore } from '../../lib/index.js';
import { escapeScope, storeKey, UNSCOPED } from '../../lib/shared/utils/key.util.js';
import { ADAPTERS, listen, startApp } from '../support/app.js';
import { rawRequest } from '../support/raw-http.js';
import { anyChar, type GeneratedRequest, type Pair, queryString, requestArbitrary, SEED } from '../support/arbitraries.js';

// Bounded runs with a fixed seed (see arbitraries.ts): reproducible and fast; raise PROPERTY_RUNS to dig deeper.
const RUNS = Number(process.env.PROPERTY_RUNS ?? 120);
const MAX_KEY = 255;
const MAX_SCOPE = 255;
const PREFIX = 'idem:';

/** Scopes the test generates, looked up by index, so they can hold bytes no header could carry. */
const scopes: string[] = [];

@Controller()
class PropertyController {
  private run = 0;

  @Post('plain')
  @Idempotent()
  plain() {
    return { run: ++this.run };
  }

  @Post('scoped')
  @Idempotent({ identity: (req: { headers: Record<string, string> }) => scopes[Number(req.headers['x-scope'])] })
  scoped() {
    return { run: ++this.run };
  }

  @Post('echo/:id')
  @Idempotent()
  echo(@Param('id') id: string, @Body() body: unknown) {
    return { id, body, run: ++this.run };
  }

  @Put('echo/:id')
  @Idempotent()
  echoPut(@Param('id') id: string) {
    return { id, run: ++this.run };
  }
}

// eslint-disable-next-line no-control-regex -- control characters are what these two describe
const FORBIDDEN = /[\x00-\x20\x7f-\x9f\u2000-\u200f\u2028-\u202f\u205f-\u2064\u3000\ufeff]/;
/** Bytes Node's own HTTP parser refuses in a header value (probed on Node 20): it answers 400 itself. */
// eslint-disable-next-line no-control-regex
const NODE_REFUSES = /[\x00-\x08\x0a-\x1f\x7f]/;
const NODE_400_BODIES = ['', '{"error":"Bad Request","message":"Client Error","statusCode":400}'];

/** What the server must answer for a key as it arrives (latin1, optional white space trimmed by Node). */
function expectedForKey(value: string): { status: number; body?: string } {
  if (value.length > MAX_KEY) return { status: 400, body: `{"error":"idempotency-key exceeds ${MAX_KEY} characters"}` };
  if (value.trim() === '') return { status: 400, body: '{"error":"idempotency-key header is required"}' };
  const i = value.search(FORBIDDEN);
  if (i >= 0)
    return {
      status: 400,
      body: `{"error":"idempotency-key has a control character, a space or an invisible character at index ${i}"}`,
    };
  return { status: 201 };
}

function expectedForScope(scope: string): { status: number; body?: string } {
  // An empty scope would merge every caller: the resolver's fault, a 500.
  if (scope === '') return { status: 500, body: '{"error":"the caller scope of this request could not be resolved"}' };
  if (escapeScope(scope).length > MAX_SCOPE)
    return { status: 400, body: `{"error":"identity scope exceeds ${MAX_SCOPE} characters"}` };
  const i = scope.search(FORBIDDEN);
  if (i >= 0)
    return {
      status: 400,
      body: `{"error":"identity scope has a control character, a space or an invisible character at index ${i}"}`,
    };
  return { status: 201 };
}

const headerValue = fc
  .oneof(
    { weight: 4, arbitrary: fc.string({ unit: anyChar, maxLength: 40 }) },
    { weight: 1, arbitrary: fc.string({ unit: anyChar, minLength: 240, maxLength: 270 }) },
    { weight: 1, arbitrary: fc.string({ unit: 'grapheme-ascii', minLength: 250, maxLength: 260 }) },
  )
  .filter((v) => !/[\r\n]/.test(v)); // CR and LF cannot be inside a header value: they end it

describe.each(ADAPTERS)('property: client-controlled inputs on %s', (adapter) => {
  let app: INestApplication;
  let port: number;
  const cache = new InMemoryStore({ maxEntries: 100_000 });

  beforeAll(async () => {
    app = await startApp(adapter, { imports: [IdempotencyModule.forRoot({ store: cache })], controllers: [PropertyController] });
    port = Number(new URL(await listen(app)).port);
  });
  afterAll(() => app.close());

  afterAll(() => {
    // Whatever was sent, no cache key is longer than the two limits allow.
    for (const key of cache.keys()) expect(key.length).toBeLessThanOrEqual(PREFIX.length + MAX_SCOPE + 1 + MAX_KEY);
  });

  it('header values: 400 exactly when a rule is broken, naming no key bytes; otherwise processed, then replayed', async () => {
    await fc.assert(
      fc.asyncProperty(headerValue, async (value) => {
        const bytes = Buffer.from(value, 'utf8');
        const arrives = bytes.toString('latin1').replace(/^[ \t]+|[ \t]+$/g, '');
        const res = await rawRequest(port, 'POST', '/plain', [['Idempotency-Key', bytes.toString('latin1')]]);
        if (NODE_REFUSES.test(arrives)) {
          expect(res.status).toBe(400);
          expect(NODE_400_BODIES).toContain(res.body);
          return;
        }
        const expected = expectedForKey(arrives);
        expect(res.status).toBe(expected.status);
        if (expected.body) {
          expect(res.body).toBe(expected.body);
          return;
        }
        // Accepted: a retry with the same bytes replays (unless an earlier run used the same key).
        const again = await rawRequest(port, 'POST', '/plain', [['Idempotency-Key', bytes.toString('latin1')]]);
        expect(again.status).toBe(201);
        expect(again.headers['idempotent-replayed']).toBe('true');
        expect(again.body).toBe(res.body);
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it('identity scopes: 400 exactly when a rule is broken (escaped length, control or space), otherwise scoped', async () => {
    const scope = fc.oneof(
      { weight: 4, arbitrary: fc.string({ unit: fc.oneof(anyChar, fc.constantFrom('\r', '\n', '\0')), maxLength: 40 }) },
      { weight: 2, arbitrary: fc.string({ unit: fc.constantFrom('a', 'b', ' ', ':', '%', 'é'), maxLength: 20 }) },
      { weight: 1, arbitrary: fc.string({ unit: fc.constantFrom('a', ':', '%', 'ü'), minLength: 80, maxLength: 270 }) },
    );
    await fc.assert(
      fc.asyncProperty(scope, fc.uuid(), async (s, key) => {
        scopes.push(s);
        const res = await request(app.getHttpServer())
          .post('/scoped')
          .set('Idempotency-Key', key)
          .set('x-scope', String(scopes.length - 1));
        const expected = expectedForScope(s);
        expect(res.status).toBe(expected.status);
        if (expected.body) expect(res.text).toBe(expected.body);
        else expect(cache.get(storeKey(PREFIX, escapeScope(s), key))).toBeDefined();
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it('query and body: a reordered twin replays; any change to a value, value order, path, method or body is 422', async () => {
    await fc.assert(
      fc.asyncProperty(requestArbitrary, fc.nat(), fc.uuid(), async (r, pick, key) => {
        const first = await post(app, key, `/echo/${r.id}?${queryString(r.pairs)}`, r.body);
        expect(first.status).toBe(201);
        const twin = await post(
          app,
          key,
          `/echo/${r.id}?${queryString(regroup(r.pairs, r.nameOrder))}`,
          shuffleKeys(r.body, pick),
        );
        expect(twin.status).toBe(201);
        expect(twin.headers['idempotent-replayed']).toBe('true');
        expect(twin.text).toBe(first.text);
        for (const changed of changes(r, pick)) {
          const res =
            changed.method === 'PUT'
              ? await request(app.getHttpServer())
                  .put(changed.path)
                  .set('Idempotency-Key', key)
                  .send(changed.body as object)
              : await post(app, key, changed.path, changed.body);
          expect({ change: changed.what, status: res.status, text: res.text }).toEqual({
            change: changed.what,
            status: 422,
            text: '{"error":"idempotency-key was already used for a different request"}',
          });
        }
      }),
      { seed: SEED, numRuns: Math.ceil(RUNS / 2) },
    );
  });
});

function post(app: INestApplication, key: string, path: string, body: unknown) {
  return request(app.getHttpServer())
    .post(path)
    .set('Idempotency-Key', key)
    .set('content-type', 'application/json')
    .send(JSON.stringify(body));
}

/** The same parameters with names in another order; a repeated name's values keep theirs. */
function regroup(pairs: Pair[], nameOrder: string[]): Pair[] {
  return nameOrder.flatMap((name) => pairs.filter(([k]) => k === name));
}

/** The same JSON with object keys in another order, at every depth. */
function shuffleKeys(value: unknown, seed: number): unknown {
  if (Array.isArray(value)) return value.map((v) => shuffleKeys(v, seed + 1));
  if (value === null || typeof value !== 'object') return value;
  const entries = Object.entries(value);
  const rotated = entries.length
    ? [...entries.slice(seed % entries.length), ...entries.slice(0, seed % entries.length)].reverse()
    : entries;
  return Object.fromEntries(rotated.map(([k, v]) => [k, shuffleKeys(v, seed + 1)]));
}

function changes(r: GeneratedRequest, pick: number): { what: string; method?: 'PUT'; path: string; body: unknown }[] {
  const path = (pairs: Pair[], id = r.id) => `/echo/${id}?${queryString(pairs)}`;
  const i = pick % r.pairs.length;
  const out: { what: string; method?: 'PUT'; path: string; body: unknown }[] = [
    { what: 'a value', path: path(r.pairs.map((p, j) => (j === i ? [p[0], `${p[1]}Z`] : p))), body: r.body },
    { what: 'a parameter more', path: path([...r.pairs, ['extra', '1']]), body: r.body },
    { what: 'the path', path: path(r.pairs, `${r.id}x`), body: r.body },
    { what: 'the method', method: 'PUT', path: path(r.pairs), body: r.body },
    { what: 'the body', path: path(r.pairs), body: { ...r.body, ['\u0000changed']: true } },
  ];
  const [name] = r.pairs[i];
  const same = r.pairs.map((p, j) => [p, j] as const).filter(([p]) => p[0] === name);
  const differing = same.find(([p]) => p[1] !== r.pairs[i][1]);
  if (differing) {
    const swapped = r.pairs.map((p) => [...p] as Pair);
    swapped[i] = r.pairs[differing[1]];
    swapped[differing[1]] = r.pairs[i];
    out.push({ what: "a repeated name's value order", path: path(swapped), body: r.body });
  }
  return out;
}

describe('property: the fingerprint and the key space', () => {
  it('B7. distinct (scope, key) pairs never share a cache key', () => {
    const text = fc.string({ unit: fc.constantFrom('a', ':', '%', '3', 'A', '2', '5', 'é'), maxLength: 8 });
    const pair = fc.tuple(fc.option(text, { nil: undefined }), text);
    fc.assert(
      fc.property(pair, pair, ([s1, k1], [s2, k2]) => {
        const c1 = storeKey(PREFIX, s1 === undefined ? UNSCOPED : escapeScope(s1), k1);
        const c2 = storeKey(PREFIX, s2 === undefined ? UNSCOPED : escapeScope(s2), k2);
        return (c1 === c2) === (s1 === s2 && k1 === k2);
      }),
      { seed: SEED, numRuns: 5000 },
    );
  });
});

describe.each(ADAPTERS)('property: two keyPrefixes on one InMemoryStore on %s', (adapter) => {
  const cache = new InMemoryStore();
  let one: INestApplication;
  let two: INestApplication;
  beforeAll(async () => {
    one = await startApp(adapter, {
      imports: [IdempotencyModule.forRoot({ store: cache, keyPrefix: 'tenant-a:' })],
      controllers: [PropertyController],
    });
    two = await startApp(adapter, {
      imports: [IdempotencyModule.forRoot({ store: cache, keyPrefix: 'tenant-b:' })],
      controllers: [PropertyController],
    });
  });
  afterAll(async () => {
    await one.close();
    await two.close();
  });

  it("never see each other's records, whatever the key", async () => {
    // Printable keys: bare (a leading quote would make a Structured Field String), or quoted as one.
    const key = fc.oneof(
      fc.stringMatching(/^[!#-~][!-~]{0,39}$/),
      fc.stringMatching(/^[!#-\x5b\x5d-~]{1,38}$/).map((k) => `"${k}"`),
    );
    await fc.assert(
      fc.asyncProperty(key, async (k) => {
        const a = await request(one.getHttpServer()).post('/plain').set('Idempotency-Key', k);
        const b = await request(two.getHttpServer()).post('/plain').set('Idempotency-Key', k);
        expect([a.status, b.status]).toEqual([201, 201]);
        expect(b.headers['idempotent-replayed']).toBe(a.headers['idempotent-replayed']);
        const a2 = await request(one.getHttpServer()).post('/plain').set('Idempotency-Key', k);
        expect(a2.text).toBe(a.text);
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });
});

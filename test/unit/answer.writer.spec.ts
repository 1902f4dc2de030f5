import { describe, expect, it } from '@jest/globals';
import { IdempotentReplay } from '../../lib/shared/exceptions/idempotent-replay.exception.js';
import { errorResponse } from '../../lib/shared/exceptions/error.response.js';
import { type AnswerOptions, writeAnswer } from '../../lib/transports/http/answer.writer.js';
import { PROBLEM_TITLES } from '../../lib/shared/messages/client.messages.js';
import { IDEMPOTENCY_CORS_HEADERS, IdempotencyException } from '../../lib/index.js';
import type { StoredResponse } from '../../lib/stores/index.js';
import type { IdempotencyErrorInfo } from '../../lib/shared/interfaces/idempotency-error.interface.js';
import { FakeResponse } from '../support/fake-response.js';
import { spyOnLogger } from '../support/logger.js';

const json = { errorFormat: 'json', problemTypeBaseUrl: 'urn:x:', errorBody: undefined } as const;
const problem = { errorFormat: 'problem+json', problemTypeBaseUrl: 'https://api.example.com/p/', errorBody: undefined } as const;

describe('errorResponse', () => {
  const logs = spyOnLogger();
  const busy = new IdempotencyException(409, 'busy; retry', { 'retry-after': '1' }, 'key-in-flight');

  it('writes {"error": sentence} as JSON by default, with the exception\'s headers', () => {
    const res = errorResponse(busy, json);
    expect(res.status).toBe(409);
    expect(res.headers).toEqual({ 'content-type': 'application/json; charset=utf-8', 'retry-after': '1' });
    expect(res.body.toString()).toBe('{"error":"busy; retry"}');
  });

  it('writes RFC 9457 problem details: type from the base and the code, the title of the type, status, the sentence as detail', () => {
    const res = errorResponse(busy, problem);
    expect(res.status).toBe(409);
    expect(res.headers).toEqual({ 'content-type': 'application/problem+json', 'retry-after': '1' });
    expect(res.body.toString()).toBe(
      '{"type":"https://api.example.com/p/key-in-flight","title":"A request is outstanding for this Idempotency-Key","status":409,"detail":"busy; retry"}',
    );
  });

  it("gives an exception without a code (an application's own) about:blank and the status text", () => {
    const res = errorResponse(new IdempotencyException(503, 'down'), problem);
    expect(JSON.parse(res.body.toString())).toEqual({
      type: 'about:blank',
      title: 'Service Unavailable',
      status: 503,
      detail: 'down',
    });
  });

  it("writes what errorBody builds from status, code and sentence, under the format's content type", () => {
    const seen: unknown[] = [];
    const errorBody = (error: IdempotencyErrorInfo) => {
      seen.push(error);
      return { error: { type: 'idempotency_error', message: error.message } };
    };
    const res = errorResponse(busy, { ...json, errorBody });
    expect(seen).toEqual([{ status: 409, code: 'key-in-flight', message: 'busy; retry' }]);
    expect(res.status).toBe(409);
    expect(res.headers).toEqual({ 'content-type': 'application/json; charset=utf-8', 'retry-after': '1' });
    expect(res.body.toString()).toBe('{"error":{"type":"idempotency_error","message":"busy; retry"}}');
    const asProblem = errorResponse(new IdempotencyException(503, 'down'), {
      ...problem,
      errorBody: (e) => [e.code ?? null, e.status],
    });
    expect(asProblem.headers).toEqual({ 'content-type': 'application/problem+json' });
    expect(asProblem.body.toString()).toBe('[null,503]');
    // Any JSON value is a body, a string and false among them.
    expect(errorResponse(busy, { ...json, errorBody: () => 'busy' }).body.toString()).toBe('"busy"');
    expect(errorResponse(busy, { ...json, errorBody: () => false }).body.toString()).toBe('false');
    expect(logs.errors).not.toHaveBeenCalled();
  });

  it.each([
    [
      'throws',
      () => {
        throw new Error('boom');
      },
      'boom',
    ],
    [
      'throws a non-Error',
      () => {
        // eslint-disable-next-line @typescript-eslint/only-throw-error -- what an application's careless code may do
        throw 'text';
      },
      'text',
    ],
    ['returns undefined', () => undefined, 'it returned a value JSON cannot write'],
    ['returns a function', () => () => 1, 'it returned a value JSON cannot write'],
    [
      'returns a cycle',
      () => {
        const a: Record<string, unknown> = {};
        a.a = a;
        return a;
      },
      'circular',
    ],
  ])('falls back to the default body, and logs why, when errorBody %s', (_name, errorBody, reason) => {
    const res = errorResponse(busy, { ...problem, errorBody });
    expect(res.status).toBe(409);
    expect(res.headers['content-type']).toBe('application/problem+json');
    expect(JSON.parse(res.body.toString())).toMatchObject({ status: 409, detail: 'busy; retry' });
    expect(logs.errors).toHaveBeenCalledTimes(1);
    const logged = String(logs.errors.mock.calls[0][0]);
    expect(logged).toContain('errorBody failed for key-in-flight, sending the default body instead: ');
    expect(logged).toContain(reason);
    const own = errorResponse(new IdempotencyException(400, 'x'), { ...json, errorBody });
    expect(own.body.toString()).toBe('{"error":"x"}');
    expect(String(logs.errors.mock.calls[1][0])).toContain('errorBody failed for an application error');
  });

  it('has a title for every code, the draft’s three among them', () => {
    expect(PROBLEM_TITLES['key-missing']).toBe('Idempotency-Key is missing');
    expect(PROBLEM_TITLES['key-reused']).toBe('Idempotency-Key is already used');
    expect(PROBLEM_TITLES['key-in-flight']).toBe('A request is outstanding for this Idempotency-Key');
    for (const [code, title] of Object.entries(PROBLEM_TITLES)) {
      expect(code).toMatch(/^[a-z]+(-[a-z]+)+$/);
      expect(title.length).toBeGreaterThan(10);
    }
  });
});

describe('writeAnswer: how a replay is marked', () => {
  const stored = (body: string, type: string | string[] | null = 'application/json; charset=utf-8'): StoredResponse => ({
    status: 201,
    headers: type === null ? { etag: '"1"' } : { 'content-type': type, etag: '"1"' },
    body: Buffer.from(body),
  });
  const replayed = (response: StoredResponse, options: Partial<AnswerOptions> = {}) => {
    const res = new FakeResponse();
    writeAnswer(res.raw, new IdempotentReplay(response), {
      ...json,
      replayFlag: 'header',
      replayedHeader: 'idempotent-replayed',
      ...options,
    });
    const end = res.calls.find((c) => c.method === 'end')!;
    return { status: res.statusCode, headers: res.getHeaders(), body: (end.args[0] as Buffer).toString() };
  };

  it('by default with Idempotent-Replayed: true and the stored bytes untouched', () => {
    const response = stored('{"id":1}');
    const res = new FakeResponse();
    writeAnswer(res.raw, new IdempotentReplay(response), {
      ...json,
      replayFlag: 'header',
      replayedHeader: 'idempotent-replayed',
    });
    expect(res.calls.find((c) => c.method === 'end')!.args[0]).toBe(response.body);
    expect(res.getHeaders()).toEqual({
      'content-type': 'application/json; charset=utf-8',
      etag: '"1"',
      'idempotent-replayed': 'true',
    });
    expect(res.statusCode).toBe(201);
  });

  it('with \'body\': "replayed": true in a JSON object body, and no header', () => {
    const out = replayed(stored('{"id":42,"status":"paid"}'), { replayFlag: 'body', replayedHeader: false });
    expect(out.body).toBe('{"id":42,"status":"paid","replayed":true}');
    expect(out.headers).toEqual({ 'content-type': 'application/json; charset=utf-8', etag: '"1"' });
    // A key of that name is set, not doubled; problem+json and other +json types are JSON too.
    expect(replayed(stored('{"replayed":false,"a":1}'), { replayFlag: 'body' }).body).toBe('{"replayed":true,"a":1}');
    expect(replayed(stored('{}', 'application/problem+json'), { replayFlag: 'body' }).body).toBe('{"replayed":true}');
    expect(replayed(stored('{"a":1}', 'Application/Vnd.Api+JSON'), { replayFlag: 'body' }).body).toBe('{"a":1,"replayed":true}');
  });

  it.each([
    ['an array', '[1,2]', 'application/json'],
    ['a string', '"x"', 'application/json'],
    ['null', 'null', 'application/json'],
    ['bytes that are not JSON', '{"a":', 'application/json'],
    ['text', '{"a":1}', 'text/plain'],
    ['a type that only starts like JSON', '{"a":1}', 'application/jsonp'],
    ['no content type', '{"a":1}', null],
    ['two content types', '{"a":1}', ['application/json', 'text/plain']],
  ])("with 'body': %s is replayed untouched", (_name, body, type) => {
    expect(replayed(stored(body, type), { replayFlag: 'body' }).body).toBe(body);
  });

  it("with 'header-and-body' both, under the header name configured", () => {
    const out = replayed(stored('{"id":1}'), { replayFlag: 'header-and-body', replayedHeader: 'x-idempotent-replayed' });
    expect(out.body).toBe('{"id":1,"replayed":true}');
    expect(out.headers['x-idempotent-replayed']).toBe('true');
    expect(out.headers['idempotent-replayed']).toBeUndefined();
  });
});

describe('IDEMPOTENCY_CORS_HEADERS', () => {
  it('lists what CORS must allow (the key) and expose (the replay mark, Retry-After), frozen', () => {
    expect(IDEMPOTENCY_CORS_HEADERS).toEqual({ allowed: ['Idempotency-Key'], exposed: ['Idempotent-Replayed', 'Retry-After'] });
    expect(Object.isFrozen(IDEMPOTENCY_CORS_HEADERS)).toBe(true);
    expect(Object.isFrozen(IDEMPOTENCY_CORS_HEADERS.allowed)).toBe(true);
    expect(Object.isFrozen(IDEMPOTENCY_CORS_HEADERS.exposed)).toBe(true);
  });
});

import { describe, expect, it } from '@jest/globals';
import {
  type CallHandler,
  Controller,
  type ExecutionContext,
  Injectable,
  type NestInterceptor,
  Post,
  Res,
  UseInterceptors,
} from '@nestjs/common';
import { mergeMap, throwError } from 'rxjs';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import Fastify from 'fastify';
import type { ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { installReplyRecorder } from '../../lib/transports/http/reply.recorder.js';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { ADAPTERS, listen, useApps } from '../support/app.js';
import { Runs } from '../support/fixtures.js';

type Hook = (
  req: unknown,
  reply: { header(n: string, v: string): unknown },
  payload: unknown,
  done: (e: null, p: unknown) => void,
) => void;
const rawOf = (res: object): ServerResponse => ('raw' in res ? (res as { raw: ServerResponse }).raw : (res as ServerResponse));

@Controller('pay')
class PayController {
  constructor(private readonly runs: Runs) {}

  @Post('plain')
  @Idempotent()
  plain(@Res({ passthrough: true }) res: object) {
    this.runs.hit('plain');
    const raw = rawOf(res);
    // What the recording did to Node's response while the handler runs.
    return { id: 'pay-1', patched: ['writeHead', 'write', 'end'].filter((m) => Object.hasOwn(raw, m)) };
  }

  @Post('by-hand')
  @Idempotent()
  async byHand(@Res({ passthrough: true }) res: object) {
    this.runs.hit('by-hand');
    const raw = rawOf(res);
    raw.statusCode = 202;
    raw.end('sent by hand');
    await sleep(20);
    return { id: 'pay-2' };
  }
}

/** Outside the module's interceptor: fails a request that asks for it after its handler succeeded. */
@Injectable()
class FailAfterSuccess implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler) {
    const fail = context.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers['x-fail'] === '1';
    return fail ? next.handle().pipe(mergeMap(() => throwError(() => new Error('audit failed')))) : next.handle();
  }
}

@Controller('audited')
@UseInterceptors(FailAfterSuccess)
class AuditedController {
  constructor(private readonly runs: Runs) {}

  @Post()
  @Idempotent()
  create(
    @Res({ passthrough: true })
    res: {
      header?: (n: string, v: string) => unknown;
      setHeader?: (n: string, v: string) => unknown;
    },
  ) {
    this.runs.hit('audited');
    if (res.header) res.header('x-charge', 'ch_3');
    else res.setHeader!('x-charge', 'ch_3');
    return { id: 'pay-3' };
  }
}

const post = (base: string, path: string, key: string) =>
  fetch(`${base}/pay/${path}`, { method: 'POST', headers: { 'idempotency-key': key } });

/** Retries while the first request's result is still being stored (409), a bounded number of times. */
async function retried(base: string, path: string, key: string): Promise<Response> {
  for (let i = 0; ; i++) {
    const res = await post(base, path, key);
    if (res.status !== 409 || i === 100) return res;
    await sleep(20);
  }
}

describe('Fastify replies are recorded by an onSend hook', () => {
  const start = useApps();
  const metadata = { imports: [IdempotencyModule.forRoot()], controllers: [PayController], providers: [Runs] };

  it("leaves Node's response unpatched and replays the reply", async () => {
    const app = await start('fastify', metadata);
    const base = await listen(app);
    const first = await post(base, 'plain', 'k1');
    expect(first.status).toBe(201);
    const body = await first.text();
    expect(JSON.parse(body)).toEqual({ id: 'pay-1', patched: [] });
    const retry = await post(base, 'plain', 'k1');
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await retry.text()).toBe(body);
    expect(app.get(Runs).of('plain')).toBe(1);
  });

  it('runs after the onSend hooks the application added before init, and replays byte for byte', async () => {
    const signed: Hook = (_req, reply, payload, done) => {
      reply.header('x-signed', 'before-init');
      done(null, payload);
    };
    const app = await start('fastify', metadata, {
      configure: (a) => void (a as NestFastifyApplication).getHttpAdapter().getInstance().addHook('onSend', signed),
    });
    const base = await listen(app);
    const first = await post(base, 'plain', 'k2');
    const body = await first.text();
    expect(JSON.parse(body)).toEqual({ id: 'pay-1', patched: [] });
    expect(first.headers.get('x-signed')).toBe('before-init');
    const retry = await post(base, 'plain', 'k2');
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.headers.get('x-signed')).toBe('before-init');
    expect(await retry.text()).toBe(body);
    expect(app.get(Runs).of('plain')).toBe(1);
  });

  it('cannot add the hook to an instance that is ready, and says so', async () => {
    const fresh = Fastify();
    expect(installReplyRecorder(fresh)).toBe(true);
    expect(installReplyRecorder(fresh)).toBe(true); // once per instance
    await fresh.ready();
    const ready = Fastify();
    await ready.ready();
    expect(installReplyRecorder(ready)).toBe(false);
    await Promise.all([fresh.close(), ready.close()]);
  });
});

describe.each(ADAPTERS)('a handler that writes Node’s response itself (%s)', (adapter) => {
  const start = useApps();

  it('is not left holding its key: its own result is stored and replayed', async () => {
    const app = await start(adapter, { imports: [IdempotencyModule.forRoot()], controllers: [PayController], providers: [Runs] });
    const base = await listen(app);
    const first = await post(base, 'by-hand', 'k3');
    expect(first.status).toBe(202);
    expect(await first.text()).toBe('sent by hand');
    const retry = await retried(base, 'by-hand', 'k3');
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await retry.json()).toEqual({ id: 'pay-2' });
    expect(app.get(Runs).of('by-hand')).toBe(1);
  });
});

describe.each(ADAPTERS)('an outer layer that fails after the handler succeeded (%s)', (adapter) => {
  const start = useApps();

  it("stores the handler's own result with the headers it set, not the error: the retry gets them", async () => {
    const app = await start(adapter, {
      imports: [IdempotencyModule.forRoot()],
      controllers: [AuditedController],
      providers: [Runs, FailAfterSuccess],
    });
    const base = await listen(app);
    const headers = { 'idempotency-key': 'k4' };
    const first = await fetch(`${base}/audited`, { method: 'POST', headers: { ...headers, 'x-fail': '1' } });
    expect(first.status).toBe(500);
    const retry = await fetch(`${base}/audited`, { method: 'POST', headers });
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.headers.get('x-charge')).toBe('ch_3');
    expect(await retry.json()).toEqual({ id: 'pay-3' });
    expect(app.get(Runs).of('audited')).toBe(1);
  });
});

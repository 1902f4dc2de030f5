import {
  BadRequestException,
  Body,
  Controller,
  Delete,
  Header,
  HttpCode,
  Inject,
  Injectable,
  Module,
  Param,
  Patch,
  Post,
  Put,
  Res,
  type CanActivate,
  type ExecutionContext,
  UseGuards,
} from '@nestjs/common';
import {
  Idempotent,
  IdempotencyKey,
  type IdempotencyIdentityResolver,
  type IdempotencyModuleOptions,
  type IdempotencyOptionsFactory,
} from '../../lib/index.js';

/** Counts handler runs per route, so tests can assert "ran exactly once". */
export class Runs {
  private readonly counts = new Map<string, number>();
  hit(name: string): number {
    const n = (this.counts.get(name) ?? 0) + 1;
    this.counts.set(name, n);
    return n;
  }
  of(name: string): number {
    return this.counts.get(name) ?? 0;
  }
  total(): number {
    let sum = 0;
    for (const n of this.counts.values()) sum += n;
    return sum;
  }
}

/** Lets a test hold a handler open (for in-flight checks) and let it go. */
export class Gate {
  private waiters: (() => void)[] = [];
  private open = true;
  private entered: (() => void)[] = [];
  close(): void {
    this.open = false;
  }
  release(): void {
    this.open = true;
    for (const w of this.waiters.splice(0)) w();
  }
  /** Resolves once a handler is waiting at the gate. */
  whenEntered(): Promise<void> {
    return new Promise((resolve) => this.entered.push(resolve));
  }
  /**
   * Closes the gate, starts `request` and waits until its handler is waiting here. `answer` settles
   * once the gate is released (wrapped: an async function would wait for it).
   */
  async hold<T>(request: () => PromiseLike<T>): Promise<{ answer: Promise<T> }> {
    this.close();
    const entered = this.whenEntered();
    const answer = Promise.resolve(request());
    await entered;
    return { answer };
  }
  async pass(): Promise<void> {
    for (const e of this.entered.splice(0)) e();
    if (this.open) return;
    await new Promise<void>((resolve) => this.waiters.push(resolve));
  }
}

/** Puts the caller named by `x-user` on the request, as an auth guard would. */
@Injectable()
export class HeaderAuthGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest();
    const user = req.headers['x-user'];
    req.user = typeof user === 'string' ? { accountId: user } : undefined;
    return true;
  }
}

/** A class resolver: sees what the guard put on the request. */
@Injectable()
export class AccountIdentity implements IdempotencyIdentityResolver {
  resolve(req: { user?: { accountId: string } }): string {
    return req.user?.accountId ?? 'anonymous';
  }
}

@Controller()
@UseGuards(HeaderAuthGuard)
export class TestController {
  constructor(
    readonly runs: Runs,
    readonly gate: Gate,
  ) {}

  @Post('payments')
  @Idempotent()
  @Header('x-custom', 'custom-value')
  @Header('location', '/payments/1')
  @Header('etag', '"v1"')
  async create(@Body() body: unknown, @IdempotencyKey() key: string) {
    const n = this.runs.hit('payments');
    await this.gate.pass();
    return { txId: `tx-${n}`, key, body };
  }

  @Put('items/:id')
  @Idempotent()
  put(@Param('id') id: string) {
    return { id, run: this.runs.hit('put') };
  }

  @Patch('items/:id')
  @Idempotent()
  patch(@Param('id') id: string) {
    return { id, run: this.runs.hit('patch') };
  }

  @Delete('items/:id')
  @Idempotent()
  @HttpCode(204)
  remove() {
    this.runs.hit('delete');
  }

  @Post('declined')
  @Idempotent()
  @HttpCode(402)
  declined() {
    return { declined: this.runs.hit('declined') };
  }

  @Post('passthrough')
  @Idempotent()
  passthrough(
    @Res({ passthrough: true })
    res: {
      status(code: number): unknown;
      code?: (c: number) => unknown;
      header?: unknown;
      setHeader?: unknown;
    },
  ) {
    const n = this.runs.hit('passthrough');
    if (typeof res.code === 'function') res.code(402);
    else res.status(402);
    return { attempt: n };
  }

  @Post('text')
  @Idempotent()
  text() {
    return `plain ${this.runs.hit('text')} ünïcode`;
  }

  @Post('throws')
  @Idempotent()
  throws() {
    this.runs.hit('throws');
    throw new BadRequestException('card declined by the test');
  }

  @Post('crashes')
  @Idempotent()
  crashes() {
    this.runs.hit('crashes');
    throw new Error('/secret/path/to/file.ts exploded');
  }

  @Post('optional')
  @Idempotent({ missingHeader: 'pass-through' })
  optional(@IdempotencyKey() key: string | undefined) {
    return { run: this.runs.hit('optional'), key: key ?? null };
  }

  @Post('short')
  @Idempotent({ ttlMs: 50 })
  short() {
    return { run: this.runs.hit('short') };
  }

  /** For a store on a real clock (PostgreSQL): long enough that a slow machine still replays within it. */
  @Post('short-real')
  @Idempotent({ ttlMs: 1500 })
  shortReal() {
    return { run: this.runs.hit('short') };
  }

  @Post('scoped')
  @Idempotent({ identity: AccountIdentity })
  scoped() {
    return { run: this.runs.hit('scoped') };
  }

  @Post('scoped-fn')
  @Idempotent({ identity: (req: { headers: Record<string, string> }) => req.headers['x-account'] ?? 'anon' })
  scopedFn() {
    return { run: this.runs.hit('scoped-fn') };
  }
}

/** A configuration service, as `forRootAsync()` users inject one (ConfigService). */
@Injectable()
export class Config {
  readonly ttlMs = 1234;
}

@Module({ providers: [Config], exports: [Config] })
export class ConfigModule {}

/** An options factory for `forRootAsync({ useClass | useExisting })`; needs {@link ConfigModule}. */
@Injectable()
export class OptionsFactory implements IdempotencyOptionsFactory {
  constructor(@Inject(Config) private readonly config: Config) {}
  createIdempotencyOptions(): IdempotencyModuleOptions {
    return { ttlMs: this.config.ttlMs, missingHeader: 'pass-through', keyPrefix: 'factory:' };
  }
}

import 'reflect-metadata';
import {
  type CallHandler,
  Controller,
  Get,
  HttpCode,
  Injectable,
  Module,
  type NestInterceptor,
  Post,
  UseInterceptors,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { IdempotencyModule, Idempotent, InMemoryCache, RedisCache, RedisCacheOptions } from '../lib/index.js';

/**
 * One benchmark variant in a process of its own: VARIANT = bare | noop | memory | redis, PORT, REDIS_URL.
 * The same trivial handler in each; GET /stats reports handler runs and the process's CPU time.
 */
const variant = process.env.VARIANT ?? 'bare';
let runs = 0;

@Controller()
class StatsController {
  @Get('stats')
  stats() {
    const cpu = process.cpuUsage();
    return { runs, cpuMicros: cpu.user + cpu.system };
  }
}

@Controller()
class BareController {
  @Post('tx')
  @HttpCode(201)
  create() {
    return { txId: `tx-${++runs}` };
  }
}

@Controller()
class IdempotentController {
  @Post('tx')
  @HttpCode(201)
  @Idempotent()
  create() {
    return { txId: `tx-${++runs}` };
  }
}

/** Does nothing: the cost of Nest's interceptor pipeline alone, the floor under any interceptor. */
@Injectable()
class NoopInterceptor implements NestInterceptor {
  intercept(_: unknown, next: CallHandler) {
    return next.handle();
  }
}

@Controller()
class NoopController {
  @Post('tx')
  @HttpCode(201)
  @UseInterceptors(NoopInterceptor)
  create() {
    return { txId: `tx-${++runs}` };
  }
}

function controller() {
  if (variant === 'bare') return BareController;
  if (variant === 'noop') return NoopController;
  return IdempotentController;
}

function imports() {
  if (variant === 'bare' || variant === 'noop') return [];
  const cache =
    variant === 'redis'
      ? new RedisCache(RedisCacheOptions.create().withUrl(process.env.REDIS_URL!))
      : new InMemoryCache({ maxEntries: 1_000_000 });
  return [IdempotencyModule.forRoot({ cache })];
}

@Module({ imports: imports(), controllers: [StatsController, controller()] })
class BenchModule {}

const app = await NestFactory.create(BenchModule, { logger: ['error'] });
await app.listen(Number(process.env.PORT), '127.0.0.1');
process.send?.('ready');
// Exit normally on SIGINT, so that node --cpu-prof can write its profile.
process.on('SIGINT', () => process.exit(0));

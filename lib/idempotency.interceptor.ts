import {
  type CallHandler,
  type ExecutionContext,
  Injectable,
  Logger,
  type NestInterceptor,
  StreamableFile,
} from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import { Observable } from 'rxjs';
import { IDEMPOTENCY_KEY_PROPERTY } from './idempotency.constants.js';
import { type ActiveClaim, IdempotencyService } from './idempotency.service.js';
import { recordResponse } from './utils/response-recorder.util.js';

function isStream(value: unknown): boolean {
  return (
    value instanceof StreamableFile ||
    (typeof value === 'object' && value !== null && typeof (value as { pipe?: unknown }).pipe === 'function')
  );
}

/**
 * Applied by `@Idempotent()`. Runs after guards (so identity resolvers see `req.user`) and inside
 * every global and controller interceptor, and records what finally leaves the server.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  private readonly logger = new Logger('Idempotency');

  constructor(private readonly service: IdempotencyService) {}

  async intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    if (context.getType() !== 'http') return next.handle();
    const http = context.switchToHttp();
    const request = http.getRequest();
    const route = this.service.routeOptions(context.getHandler());
    const claim = await this.service.begin(request, context, route);
    if (!claim) return next.handle();
    request[IDEMPOTENCY_KEY_PROPERTY] = claim.key;

    const response = http.getResponse();
    const raw: ServerResponse = response.raw ?? response;
    let settled = false;
    const recording = recordResponse(raw, {
      onEnd: (stored) => {
        settled = true;
        return this.service.commit(claim, stored);
      },
      onStream: () => {
        settled = true;
        this.giveUp(claim, 'was streamed');
      },
    });
    this.service.hold(claim);

    // One subscriber rather than a chain of operators: this runs on every decorated request.
    return new Observable<unknown>((subscriber) => {
      const subscription = next.handle().subscribe({
        next: (value) => {
          if (!settled && isStream(value)) {
            recording.abandon();
            this.giveUp(claim, 'returned a stream');
          }
          subscriber.next(value);
        },
        // A thrown error frees the key before the error response goes out, so a retry runs again.
        error: (err: unknown) => {
          recording.abandon();
          this.service.unhold(claim);
          this.service.release(claim).then(() => subscriber.error(err));
        },
        complete: () => {
          this.service.unhold(claim);
          subscriber.complete();
        },
      });
      return () => {
        subscription.unsubscribe();
        this.service.unhold(claim);
      };
    });
  }

  private giveUp(claim: ActiveClaim, why: string): void {
    this.logger.warn(`response not stored: the handler ${why}; the key is released`);
    void this.service.release(claim);
  }
}

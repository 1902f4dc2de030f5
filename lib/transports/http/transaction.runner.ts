import { type CallHandler, Inject, Injectable, Logger } from '@nestjs/common';
import { Observable } from 'rxjs';
import { IdempotencyException } from '../../shared/exceptions/idempotency.exception.js';
import { HandlerRun, responseStart } from './handler.run.js';
import { errorResponse } from '../../shared/exceptions/error.response.js';
import { writeAnswer } from './answer.writer.js';
import { IDEMPOTENCY_MODULE_OPTIONS } from '../../shared/idempotency.constants.js';
import { LOGS, FAILURES } from '../../shared/messages/operator.messages.js';
import type { ActiveClaim } from '../../shared/interfaces/active-claim.interface.js';
import type { ResolvedIdempotencyOptions } from '../../shared/interfaces/resolved-options.interface.js';
import type { StoredResponse } from '../../shared/interfaces/stored-response.interface.js';
import { LeaseLost } from '../../shared/exceptions/lease-lost.error.js';
import { TransactionFailures } from '../../core/transaction.failures.js';
import { TransactionSettler } from '../../core/transaction.settler.js';
import { withTimeout } from '../../shared/utils/timeout.util.js';

/** `response`, unless the claim's lease ends first: the transaction must not wait for ever. One timer, transactional requests only. */
function beforeLeaseEnds(response: Promise<StoredResponse>, claim: ActiveClaim): Promise<StoredResponse> {
  return withTimeout(response, claim.claimedAt + claim.leaseMs - Date.now(), () => new LeaseLost(FAILURES.leaseOver));
}

/**
 * Runs a `transactional: true` route: "claim outside, complete inside, fenced". The claim was
 * committed on the store's own pool (a duplicate gets 409 at once, a replay costs no transaction);
 * here the handler runs inside one transaction of the `transactions` port, and the fenced completion
 * of the claim is that transaction's last statement, so the record commits with the handler's writes
 * or not at all.
 *
 * The record is the response as it goes out: the transaction stays open until the response reaches
 * `end()` (outer interceptors and filters included), whose bytes are held back until COMMIT has
 * answered. A COMMIT that fails replaces them with a 409 or 503: a client never reads a success whose
 * writes were rolled back. The lease is the route's fixed `transactionTimeoutMs`, never renewed.
 */
@Injectable()
export class TransactionRunner {
  private readonly logger = new Logger('Idempotency');

  constructor(
    private readonly failures: TransactionFailures,
    @Inject(IDEMPOTENCY_MODULE_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    private readonly transaction: TransactionSettler,
  ) {}

  run(claim: ActiveClaim, response: object, next: CallHandler): Observable<unknown> {
    const start = responseStart(response);

    return new Observable<unknown>((subscriber) => {
      let started = false; // the transaction is open and the handler subscribed
      let handlerError: { error: unknown } | undefined;
      let deliver!: (stored: StoredResponse) => void;
      const final = new Promise<StoredResponse>((resolve) => (deliver = resolve));

      const run = new HandlerRun(
        start,
        claim.route,
        this.logger,
        {
          ended: (kept) => {
            deliver(kept);
            return outcome;
          },
          streamed: () => (run.finished ? deliver(run.rendered()) : run.detach(LOGS.answeredOutside)),
        },
        true,
      );

      // Settles once the handler completes or fails; a failure is left in handlerError.
      const handler = (): Promise<void> =>
        new Promise<void>((settle) => {
          run.subscribe(next, subscriber, {
            stream: () => {
              this.logger.error(LOGS.transactionalStream(claim.route));
              handlerError ??= { error: new Error(LOGS.transactionalStream(claim.route)) };
              settle();
              return false;
            },
            error: (err) => {
              handlerError ??= { error: err };
              settle();
            },
            complete: settle,
          });
        });

      const work = async (): Promise<void> => {
        started = true;
        // The handler is never cut short: rolled back under it, its later writes through txHost.tx
        // would fall back to no transaction at all. A hung one is the database's to end
        // (idle_in_transaction_session_timeout). Only the wait for its response is bounded.
        await handler();
        run.finished = true; // a returned stream ends the run without completing it
        if (handlerError) throw handlerError.error;
      };
      // The response now travels through the outer layers to end(), which hands it over here.
      const record = (): Promise<StoredResponse> => {
        if (run.detached) deliver(run.rendered());
        else subscriber.complete();
        return beforeLeaseEnds(final, claim);
      };

      let refused: IdempotencyException | undefined; // the module's answer to a failed transaction
      const outcome: Promise<StoredResponse | undefined> = this.transaction
        .run(claim, work, record, this.options.headerName)
        .then(
          () => undefined,
          // The handler's own error, or BEGIN's, is answered below; the others replace the response.
          (err: unknown) => {
            if (handlerError) return undefined;
            refused = err as IdempotencyException;
            return started ? errorResponse(refused, this.options) : undefined;
          },
        )
        .then((instead) => {
          const retryable = handlerError && this.failures.retryable(handlerError.error);
          if (retryable) {
            run.stop();
            writeAnswer(response, retryable, this.options);
            subscriber.error(retryable);
          } else if (handlerError) {
            run.stop();
            subscriber.error(handlerError.error);
          } else if (!started) {
            run.detached = true; // no handler ran: nothing to wait for once the error is out
            run.stop();
            writeAnswer(response, refused!, this.options);
            subscriber.error(refused);
          }
          return instead;
        });

      // Torn down before the handler finished (client gone, outer timeout): it runs on in its
      // transaction, and its own result is what commits.
      return run;
    });
  }
}

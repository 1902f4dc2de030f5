import { Inject, Injectable, Logger } from '@nestjs/common';
import type { RecordSealer } from './record-sealer.interface.js';
import { UnsealableRecord } from '../shared/exceptions/unsealable-record.exception.js';
import { IdempotencyException } from '../shared/exceptions/idempotency.exception.js';
import { errorResponse } from '../shared/exceptions/error.response.js';
import { IDEMPOTENCY_MODULE_OPTIONS, RECORD_SEALER } from '../shared/idempotency.constants.js';
import { isRefusal } from './values/stored-value.js';
import { MESSAGES } from '../shared/messages/client.messages.js';
import { LOGS } from '../shared/messages/operator.messages.js';
import type { ActiveClaim } from '../shared/interfaces/active-claim.interface.js';
import type { IdempotencyRecord } from '../stores/contract/idempotency-store.interface.js';
import type { ResolvedIdempotencyOptions, ResolvedRouteOptions } from '../shared/interfaces/resolved-options.interface.js';
import type { StoredResponse } from '../shared/interfaces/stored-response.interface.js';

/** Turns a response into the record a commit stores, and a stored record back into the response a replay sends. */
@Injectable()
export class RecordBuilder {
  private readonly logger = new Logger('Idempotency');

  constructor(
    @Inject(IDEMPOTENCY_MODULE_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    @Inject(RECORD_SEALER) private readonly sealer: RecordSealer,
  ) {}

  /**
   * What is stored for the claim's response: sealed when `encryption` is on. A body over
   * `maxResponseBytes` is not kept: the record holds the response's status and a short JSON body
   * saying so (`response-too-large`), which retries get for the ttl; the handler never runs again.
   */
  record(claim: ActiveClaim, response: StoredResponse): IdempotencyRecord {
    const kept =
      response.body.length > this.options.maxResponseBytes && !isRefusal(response) ? this.tooLarge(claim, response) : response;
    return this.sealer.record(claim.storeKey, claim.fingerprint, kept);
  }

  /** The response of a record to replay: opened when sealed; one that cannot be opened is unreadable. */
  response(storeKey: string, record: IdempotencyRecord, route: ResolvedRouteOptions): StoredResponse {
    try {
      return this.sealer.response(storeKey, record);
    } catch (err) {
      if (err instanceof UnsealableRecord) throw this.unreadable(route, err.message);
      throw err;
    }
  }

  /** A record that may stand for a charge but cannot be read: neither replayed nor run again; the deploy or an operator ends it. */
  unreadable(route: ResolvedRouteOptions, reason: string): IdempotencyException {
    this.logger.error(LOGS.unreadable(route.id, reason));
    return IdempotencyException.of('record-unreadable', MESSAGES.unreadable);
  }

  private tooLarge(claim: ActiveClaim, response: StoredResponse): StoredResponse {
    const { maxResponseBytes } = this.options;
    this.logger.warn(LOGS.tooLargeToStore(claim.route, response.body.length, maxResponseBytes));
    const note = IdempotencyException.of('response-too-large', MESSAGES.tooLargeToReplay(maxResponseBytes), response.status);
    return errorResponse(note, this.options);
  }
}

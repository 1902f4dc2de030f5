import { Injectable } from '@nestjs/common';
import type { IdempotencyIdentityResolver } from '../lib/index.js';
import type { Caller } from './auth.guard.js';

/** Scopes idempotency keys per account: Bob's key "k1" never replays Alice's payment. */
@Injectable()
export class AccountIdentityResolver implements IdempotencyIdentityResolver {
  resolve(req: { user: Caller }): string {
    return req.user.accountId;
  }
}

import { Inject, Injectable } from '@nestjs/common';
import { ResponseSealer } from '../encryption/response.sealer.js';
import { UnsealableRecord } from '../../shared/exceptions/unsealable-record.exception.js';
import { IDEMPOTENCY_MODULE_OPTIONS } from '../../shared/idempotency.constants.js';
import { CONFIG_ERRORS } from '../../shared/messages/config.messages.js';
import type {
  IdempotencyInspectOptions,
  IdempotencyKeyInfo,
  IdempotencyKeyTarget,
} from '../../shared/interfaces/idempotency-key-info.interface.js';
import type { ResolvedIdempotencyOptions } from '../../shared/interfaces/resolved-options.interface.js';
import { storeKey, escapeScope, type Surface, surfaceScope, UNSCOPED } from '../../shared/utils/key.util.js';
import { inspects } from '../../stores/contract/store.capabilities.js';
import type { Inspection } from '../../stores/contract/store-capabilities.interface.js';

/** The target options naming a handler's own records, and the surface each is on. */
const OWNERS: readonly (readonly ['consumer' | 'messageHandler' | 'mutation', Surface])[] = [
  ['consumer', 'inbox'],
  ['messageHandler', 'message'],
  ['mutation', 'graphql'],
];

/**
 * For support tools and runbooks: looks at a key, or forgets it so that the next request with it runs
 * the handler again. Through the store's `peek` and `forget`, never on the request path. Forgetting
 * a key whose handler still runs lets a retry run it a second time: inspect first.
 */
@Injectable()
export class IdempotencyAdmin {
  /** @internal Nest's injector builds it: inject it, do not construct it. */
  constructor(
    @Inject(IDEMPOTENCY_MODULE_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    private readonly sealer: ResponseSealer,
  ) {}

  /** What the key holds, or `undefined` when nothing live: state, expiry, status and headers; the body only when asked. */
  async inspect(key: string, options: IdempotencyInspectOptions = {}): Promise<IdempotencyKeyInfo | undefined> {
    const storeKey = this.storeKey(key, options);
    const entry = await this.store('peek').peek(storeKey);
    if (!entry) return undefined;
    const info = {
      state: entry.state,
      expiresAt: entry.expiresAt,
      fingerprint: undefined,
      status: undefined,
      headers: undefined,
      body: undefined,
      reason: undefined,
    };
    switch (entry.state) {
      case 'in-flight':
        return { ...info, fingerprint: entry.fingerprint };
      case 'completed': {
        const { fingerprint } = entry.record;
        let response;
        try {
          response = this.sealer.response(storeKey, entry.record);
        } catch (err) {
          if (!(err instanceof UnsealableRecord)) throw err;
          return { ...info, state: 'unreadable', fingerprint, reason: err.message };
        }
        return {
          ...info,
          fingerprint,
          status: response.status,
          headers: response.headers,
          body: options.body ? response.body : undefined,
        };
      }
      case 'unreadable':
        return { ...info, reason: entry.reason };
    }
  }

  /** Deletes the key's claim or record; `true` when there was one. */
  async forget(key: string, options: IdempotencyKeyTarget = {}): Promise<boolean> {
    return this.store('forget').forget(this.storeKey(key, options));
  }

  private store<M extends keyof Inspection>(method: M): Pick<Inspection, M> {
    const { store } = this.options;
    if (!inspects(store, method)) throw new Error(CONFIG_ERRORS.noAdmin(store.constructor.name, method));
    return store;
  }

  private storeKey(key: string, target: IdempotencyKeyTarget): string {
    const { scope } = target;
    if (typeof key !== 'string' || key === '') throw new Error(CONFIG_ERRORS.adminKey);
    if (scope !== undefined && (typeof scope !== 'string' || scope === '')) throw new Error(CONFIG_ERRORS.adminScope);
    const caller = scope === undefined ? UNSCOPED : escapeScope(scope);
    const owners = OWNERS.filter(([option]) => target[option] !== undefined);
    if (owners.length === 0) return storeKey(this.options.keyPrefix, caller, key);
    const [[option, surface]] = owners;
    const owner = target[option];
    if (owners.length > 1 || typeof owner !== 'string' || owner === '') throw new Error(CONFIG_ERRORS.adminOwner);
    return storeKey(this.options.keyPrefix, surfaceScope(caller, surface, owner), key);
  }
}

import { Inject, Injectable } from '@nestjs/common';
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { IDEMPOTENCY_MODULE_OPTIONS } from '../../shared/idempotency.constants.js';
import { FAILURES } from '../../shared/messages/operator.messages.js';
import type { IdempotencyRecord } from '../../stores/contract/idempotency-store.interface.js';
import type { ResolvedIdempotencyOptions } from '../../shared/interfaces/resolved-options.interface.js';
import type { StoredResponse } from '../../shared/interfaces/stored-response.interface.js';
import type { RecordSealer } from '../../core/record-sealer.interface.js';
import { UnsealableRecord } from '../../shared/exceptions/unsealable-record.exception.js';
import { decodeRecord, encodeRecord, SEALED_PLACEHOLDER } from '../../stores/shared/store-value.codec.js';

const ALGORITHM = 'aes-256-gcm';
const IV_BYTES = 12;
const TAG_BYTES = 16;
const NL = 0x0a;

/**
 * Seals stored responses with AES-256-GCM (`encryption`): "<key id>\n<IV><tag><ciphertext>", a random
 * 96-bit IV per record, and the store key and fingerprint as additional authenticated data, so a
 * record altered or moved to another key fails to open. Without `encryption` records pass as they are.
 */
@Injectable()
export class ResponseSealer implements RecordSealer {
  constructor(@Inject(IDEMPOTENCY_MODULE_OPTIONS) private readonly options: ResolvedIdempotencyOptions) {}

  /** The record to store for `response` under `storeKey`: sealed with the current key, or readable without `encryption`. */
  record(storeKey: string, fingerprint: string, response: StoredResponse): IdempotencyRecord {
    const encryption = this.options.encryption;
    if (!encryption) return { fingerprint, response };
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv(ALGORITHM, encryption.keys.get(encryption.current)!, iv);
    cipher.setAAD(aad(storeKey, fingerprint));
    // The plaintext is the readable record's own encoding, without its fingerprint (it is outside).
    const body = Buffer.concat([cipher.update(encodeRecord({ fingerprint: '', response })), cipher.final()]);
    const sealed = Buffer.concat([Buffer.from(`${encryption.current}\n`, 'latin1'), iv, cipher.getAuthTag(), body]);
    return { fingerprint, response: SEALED_PLACEHOLDER, sealed };
  }

  /**
   * The response a record holds; throws {@link UnsealableRecord} for a sealed one it cannot open, and,
   * with `encryption`, for one not sealed (past `acceptUnsealedUntil`): a plaintext record swapped in
   * would otherwise be replayed with whatever headers and body its writer chose.
   */
  response(storeKey: string, record: IdempotencyRecord): StoredResponse {
    const { sealed } = record;
    if (!sealed) {
      const { encryption } = this.options;
      if (encryption && Date.now() >= encryption.acceptUnsealedUntil) throw new UnsealableRecord(FAILURES.notSealed);
      return record.response;
    }
    const nl = sealed.indexOf(NL);
    const id = sealed.toString('latin1', 0, Math.max(nl, 0)).slice(0, 64);
    const key = this.options.encryption?.keys.get(id);
    if (!this.options.encryption) throw new UnsealableRecord(FAILURES.notEncrypted);
    // No newline reads as an empty id, which no key has.
    if (!key) throw new UnsealableRecord(FAILURES.unknownKeyId(JSON.stringify(id)));
    const iv = sealed.subarray(nl + 1, nl + 1 + IV_BYTES);
    const tag = sealed.subarray(nl + 1 + IV_BYTES, nl + 1 + IV_BYTES + TAG_BYTES);
    try {
      // Only a full tag (a record cut short has less): a shorter one would be a weaker check.
      const decipher = createDecipheriv(ALGORITHM, key, iv, { authTagLength: TAG_BYTES });
      decipher.setAAD(aad(storeKey, record.fingerprint));
      decipher.setAuthTag(tag);
      const plain = Buffer.concat([decipher.update(sealed.subarray(nl + 1 + IV_BYTES + TAG_BYTES)), decipher.final()]);
      return decodeRecord(plain).response;
    } catch {
      throw new UnsealableRecord(FAILURES.notAuthentic(JSON.stringify(id)));
    }
  }
}

/** Binds a record to its store key and fingerprint; neither holds a newline. */
function aad(storeKey: string, fingerprint: string): Buffer {
  return Buffer.from(`${storeKey}\n${fingerprint}`, 'utf8');
}

import { describe, expect, it } from '@jest/globals';
import { IDEMPOTENCY_MODULE_OPTIONS } from '../../lib/shared/idempotency.constants.js';
import { type HostModule, registrationOf, servedBy } from '../../lib/nest/idempotent-handlers.finder.js';

let ids = 0;
function mod(
  options?: object,
  imports: (HostModule | undefined)[] = [],
  exported: unknown[] = [],
): HostModule & { imports: Set<HostModule | undefined> } {
  const metatype = class {};
  const providers = new Map<unknown, unknown>(options ? [[IDEMPOTENCY_MODULE_OPTIONS, { instance: options }]] : []);
  const exports = new Set<unknown>(options ? [IDEMPOTENCY_MODULE_OPTIONS, ...exported] : exported);
  return { id: String(++ids), metatype, providers, exports, imports: new Set(imports) };
}

describe('registrationOf', () => {
  it("finds the host's own provider, else the first import that provides and exports it", () => {
    const own = mod({});
    expect(registrationOf(own)).toBe(own);
    const first = mod({});
    const second = mod({});
    expect(registrationOf(mod(undefined, [undefined, mod(), first, second]))).toBe(first);
  });

  it('looks through a module only where it re-exports the module holding the registration', () => {
    const registration = mod({});
    const reexporting = mod(undefined, [registration], [registration.metatype]);
    const hiding = mod(undefined, [registration]);
    expect(registrationOf(mod(undefined, [reexporting]))).toBe(registration);
    expect(registrationOf(mod(undefined, [hiding]))).toBeUndefined();
    const global = mod({});
    expect(registrationOf(mod(undefined, [hiding, global]))).toBe(global);
  });

  it('visits each module once (cycles end)', () => {
    const a = mod();
    const b = mod(undefined, [a], [a.metatype]);
    a.imports.add(b);
    expect(registrationOf(mod(undefined, [a, b]))).toBeUndefined();
  });
});

describe('servedBy', () => {
  it('accepts the controllers of its own registration, and those whose registration is unknown', () => {
    const options = {};
    const serves = servedBy(options);
    expect(serves(mod(undefined, [mod(options)]))).toBe(true);
    expect(serves(mod(undefined, [mod({})]))).toBe(false);
    expect(serves(mod())).toBe(true);
    expect(serves(undefined)).toBe(true);
  });
});

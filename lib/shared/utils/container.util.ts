import type { Type } from '@nestjs/common';
import type { ModuleRef } from '@nestjs/core';

/**
 * The instance of a class an option names: the application's own provider when a module has one,
 * else built with the dependencies the container has.
 */
export async function instanceFromContainer<T>(moduleRef: ModuleRef, type: Type<T>): Promise<T> {
  try {
    return moduleRef.get(type, { strict: false });
  } catch {
    return moduleRef.create(type);
  }
}

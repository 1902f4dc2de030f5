// Jest as `npm run test:mutation` (Stryker) runs it: the unit suites, which drive each building block
// directly, and the Redis store suite (real redis-server), all imported by one file,
// test/mutation/suite.mutation.ts. Suites that boot apps over HTTP (e2e, property) are left out:
// they cover the same code through far slower paths. Suites that drive child processes run the
// compiled dist/ and .build/, not the mutated sources, so they could not kill a mutant anyway.
import { fileURLToPath } from 'node:url';
import base from './jest.config.js';

export default {
  ...base,
  testMatch: ['<rootDir>/test/mutation/suite.mutation.ts'],
  // An absolute path: Stryker require()s the environment itself, without expanding <rootDir>.
  testEnvironment: fileURLToPath(new URL('./test/support/bail.environment.cjs', import.meta.url)),
};

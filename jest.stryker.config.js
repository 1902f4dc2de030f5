// Jest as `npm run test:mutation` (Stryker) runs it: one file, test/mutation/suite.mutation.ts, that
// imports the unit suites, the store suites (real redis-server, PostgreSQL, SQLite) and the e2e suites
// of the optional features (docs/mutation.md lists them). The property and load suites are left out:
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

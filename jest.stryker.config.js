// The in-process part of the suite, for mutation testing: tests that only drive child processes
// (which run the compiled dist/ and .build/, not the mutated sources) cannot kill a mutant.
import base from './jest.config.js';

export default {
  ...base,
  // STRYKER_TESTS=unit: only the unit suites, for a quick score of the modules they cover.
  ...(process.env.STRYKER_TESTS === 'unit' ? { testMatch: ['<rootDir>/test/unit/**/*.spec.ts'] } : {}),
  globalSetup: undefined,
  testPathIgnorePatterns: [
    '/node_modules/',
    '<rootDir>/test/load/',
    '<rootDir>/test/redis/multi-pod',
    '<rootDir>/test/unit/optional-ioredis',
    '<rootDir>/test/property/cross-process',
  ],
};

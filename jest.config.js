import { createRequire } from 'node:module';

// Nest 12 ships as ES modules only, so jest runs in native ESM mode (see the "test" script).
export default {
  testEnvironment: 'node',
  rootDir: '.',
  testMatch: ['<rootDir>/test/**/*.spec.ts'],
  // Stryker's sandbox is a copy of the project: never collect or resolve from it.
  modulePathIgnorePatterns: ['<rootDir>/.stryker-tmp/'],
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: {
    '^(\\.{1,2}/.*)\\.js$': '$1',
    // @fastify/static (which Mercurius loads) require()s content-disposition 3, an ES module: Node 20
    // loads that, jest's module registry cannot. Version 2 (CommonJS, Express's) has the same API.
    // Resolved here, from the project: in Stryker's sandbox node_modules is a link jest's mapper does not follow.
    '^content-disposition$': createRequire(import.meta.url).resolve('content-disposition'),
  },
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.json' }],
  },
  setupFilesAfterEnv: ['<rootDir>/test/support/after-env.ts'],
  testSequencer: '<rootDir>/test/support/slow-first.sequencer.cjs',
  testTimeout: 30000,
};

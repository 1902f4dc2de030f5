// Nest 12 ships as ES modules only, so jest runs in native ESM mode (see the "test" script).
export default {
  testEnvironment: 'node',
  rootDir: '.',
  testMatch: ['<rootDir>/test/**/*.spec.ts'],
  // Stryker's sandbox is a copy of the project: never collect or resolve from it.
  modulePathIgnorePatterns: ['<rootDir>/.stryker-tmp/'],
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.json' }],
  },
  setupFilesAfterEnv: ['<rootDir>/test/support/after-env.ts'],
  testTimeout: 30000,
};

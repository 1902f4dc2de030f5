import { execFileSync } from 'node:child_process';

// Tests that start other processes run compiled code: the package as shipped (dist/) and the sample
// app (.build/). Compile both once per test run.
export default function globalSetup() {
  const tsc = (...args) => execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', ...args], { stdio: 'inherit' });
  tsc('-p', 'tsconfig.build.json');
  tsc('-p', 'tsconfig.json', '--outDir', '.build', '--noEmit', 'false');
}

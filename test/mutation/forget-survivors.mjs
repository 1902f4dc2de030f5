// Removes the surviving and uncovered mutants from Stryker's incremental report, so that the next
// `npm run test:mutation` tests them again while it reuses every killed one.
//
// Why: the whole test set is one jest file (suite.mutation.ts imports the specs), so Stryker's
// incremental diff sees a test by its name only. A test whose body changed, or a new test that
// Stryker's coverage does not tie to a mutant, leaves an old survivor reused as survived although
// the suite kills it now. Killed results stay: tests are only ever added or strengthened.
//
// Usage: node test/mutation/forget-survivors.mjs [reports/stryker-incremental.json]
import { readFileSync, writeFileSync } from 'node:fs';

const file = process.argv[2] ?? 'reports/stryker-incremental.json';
const report = JSON.parse(readFileSync(file, 'utf8'));
let forgotten = 0;
for (const entry of Object.values(report.files)) {
  const kept = entry.mutants.filter((m) => m.status !== 'Survived' && m.status !== 'NoCoverage');
  forgotten += entry.mutants.length - kept.length;
  entry.mutants = kept;
}
writeFileSync(file, JSON.stringify(report));
console.log(`${file}: ${forgotten} surviving or uncovered mutants forgotten; the next run tests them again`);

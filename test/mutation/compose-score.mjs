// The mutation score of lib/ at its current source, composed from Stryker reports: each file's result
// comes from the first report given whose copy of that file's source is the current one, so files no
// run has measured since they changed show up instead of counting with stale results.
//
// Why: a full run of lib/ is about four hours on 2 cores; runs over the files that changed, kept
// with the reports of earlier runs, measure the same thing in parts.
//
// Usage: node test/mutation/compose-score.mjs newest.json [older.json ...]
//        (Stryker's JSON report or its incremental report; both keep each file's source)
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const reports = process.argv.slice(2).map((file) => [file, JSON.parse(readFileSync(file, 'utf8'))]);
const files = execFileSync('git', ['ls-files', 'lib'], { encoding: 'utf8' })
  .trim()
  .split('\n')
  .filter(
    (f) => f.endsWith('.ts') && f !== 'lib/index.ts' && !f.startsWith('lib/testing/') && !f.startsWith('lib/shared/interfaces/'),
  );
const total = { detected: 0, survived: 0, noCoverage: 0 };
const withSurvivors = [];
const unmeasured = [];
for (const file of files) {
  const source = readFileSync(file, 'utf8');
  const found = reports.find(([, report]) => report.files[file]?.source === source);
  if (!found) {
    unmeasured.push(file);
    continue;
  }
  const count = { detected: 0, survived: 0, noCoverage: 0 };
  for (const { status } of found[1].files[file].mutants) {
    if (status === 'Killed' || status === 'Timeout') count.detected++;
    else if (status === 'Survived') count.survived++;
    else if (status === 'NoCoverage') count.noCoverage++;
  }
  for (const k of Object.keys(total)) total[k] += count[k];
  const scored = count.detected + count.survived + count.noCoverage;
  if (count.detected < scored) withSurvivors.push(`${file} ${count.detected}/${scored} (${found[0]})`);
}
const scored = total.detected + total.survived + total.noCoverage;
console.log(
  `score ${((100 * total.detected) / scored).toFixed(2)} % (${total.detected}/${scored}); survived ${total.survived}, no coverage ${total.noCoverage}`,
);
console.log(`files with survivors:\n  ${withSurvivors.join('\n  ')}`);
// Files without mutants (types, constants) are never in a report: they are listed here too.
console.log(`not measured at their current source: ${unmeasured.join(' ') || 'none'}`);

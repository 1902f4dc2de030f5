// The test environment of mutation runs: once a test has failed for the active mutant, the mutant
// is killed, so every later test of that run fails at once and later suites skip their hooks (no
// app, no redis-server started for nothing). Stryker's jest runner cannot turn on jest's own bail.
// CommonJS because Stryker loads the environment with require().
const { TestEnvironment } = require('jest-environment-node');

const MUTANT = '__STRYKER_ACTIVE_MUTANT__';
const KILLED = 'IDEMPOTENCY_MUTANT_KILLED';

class BailEnvironment extends TestEnvironment {
  async handleTestEvent(event, state) {
    const mutant = process.env[MUTANT];
    if (mutant === undefined) return; // the dry run must see every test
    if (event.name === 'test_fn_failure' || event.name === 'hook_failure') process.env[KILLED] = mutant;
    if (process.env[KILLED] !== mutant) return;
    if (event.name === 'run_describe_start') event.describeBlock.hooks = [];
    if (event.name === 'test_start') {
      event.test.fn = () => {
        throw new Error(`mutant ${mutant} already killed`);
      };
    }
  }
}

module.exports = BailEnvironment;

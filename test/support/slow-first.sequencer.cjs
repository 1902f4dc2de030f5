// The order jest starts suites in. Jest puts the suites that took longest last time first, but a fresh
// clone (CI) has no timings and jest falls back to file size: the fault-injection suite, a short file
// that runs for minutes, then started last and ran alone on an idle machine for its last 3 minutes.
// The suites that start processes, pods and brokers go first; jest's own order is kept within each part.
// CommonJS because jest require()s a sequencer.
const Sequencer = require('@jest/test-sequencer').default;

const LONG = /[\\/]test[\\/](chaos|process|load)[\\/]/;

class SlowFirstSequencer extends Sequencer {
  sort(tests) {
    const sorted = super.sort(tests);
    return [...sorted.filter((t) => LONG.test(t.path)), ...sorted.filter((t) => !LONG.test(t.path))];
  }
}

module.exports = SlowFirstSequencer;

import { afterAll } from '@jest/globals';
import { killTracked } from './processes.js';

// Registered at the root of every test file, so it runs after the suites' own afterAll hooks.
afterAll(killTracked);

// Runs in every test file: temporary directories made through the CLI helper are removed afterwards.
import { afterAll } from 'vitest';
import { removeTempDirs } from './helpers/cli.js';

afterAll(() => removeTempDirs());

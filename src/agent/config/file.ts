import { readFileSync } from 'node:fs';
import { locateJsonError } from '../../protocol/json-position.js';
import { ConfigError } from './error.js';

/** Reads the JSON object at `path`; null when the default file is absent (env-only configuration). */
export function readConfigFile(path: string, by: string | null): Record<string, unknown> | null {
  let body: string;
  try {
    body = readFileSync(path, 'utf8').replace(/^\uFEFF/, '');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' && by === null) return null;
    if (code === 'ENOENT') {
      throw new ConfigError('config', `config file ${path} does not exist (named by ${by})`, { cause: err, fix: `create it or fix ${by}` });
    }
    throw new ConfigError('config', `config file ${path} cannot be read (${code})`, { cause: err, fix: 'check its path and permissions' });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    // V8's message may quote the file, which could hold a pasted secret: locate the error ourselves.
    const where = locateJsonError(body);
    const at = where ? ` at line ${where.line}, column ${where.column} (position ${where.offset}): ${where.problem}` : '';
    throw new ConfigError('config', `config file ${path} is not valid JSON: syntax error${at}`, { fix: 'fix the file' });
  }
  if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  throw new ConfigError('config', `config file ${path} must hold a JSON object like {"baseUrl": "https://…"}`, { fix: 'fix the file' });
}

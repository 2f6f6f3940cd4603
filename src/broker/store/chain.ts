/**
 * A gated chain: a read, then statements each gated on what the ones before returned, run as one step
 * of the store. The chain is written once; the dialects run it their own way:
 * - PostgreSQL: one statement, the steps as data-modifying CTEs and the read as its main query, so every
 *   part sees one snapshot and the whole costs one round trip (a token request's bookkeeping);
 * - SQLite (which takes no INSERT inside WITH): the read first, then each step in order, inside the
 *   turn's transaction of its one writer.
 * A step refers to an earlier step's output as `{step.column}`: PostgreSQL reads it from that CTE, SQLite
 * binds the value the step returned (NULL when it returned no row). Values are `$n` placeholders shared by
 * every part; each is CAST where PostgreSQL could not tell its type, which both databases accept.
 */

export interface ChainStep {
  /** The name later steps and the outputs use. */
  readonly name: string;
  /** One statement: a SELECT, or an INSERT / UPDATE with RETURNING when a later step reads it. */
  readonly sql: string;
}

export interface GatedChain {
  /** A name PostgreSQL prepares the fused statement under, once per connection. */
  readonly name: string;
  /** A SELECT whose single row the chain answers with, read before any step writes (optional). */
  readonly read: string | undefined;
  readonly steps: readonly ChainStep[];
  /** The step outputs the chain answers with, as `step.column`. */
  readonly outputs: readonly string[];
}

const MARKER = /\{([a-z_]+)\.([a-z_]+)\}/g;

/** The `{step.column}` markers of `sql`, in order of appearance. */
export function markersOf(sql: string): { step: string; column: string; text: string }[] {
  return [...sql.matchAll(MARKER)].map((m) => ({ step: m[1] as string, column: m[2] as string, text: m[0] }));
}

/** The chain as one PostgreSQL statement: `WITH step AS (…), … SELECT outputs, read`. */
export function fusedStatement(c: GatedChain): string {
  const scalar = (sql: string): string => sql.replace(MARKER, (_, step: string, column: string) => `(SELECT ${column} FROM ${step})`);
  const ctes = c.steps.map((s) => `${s.name} AS (${scalar(s.sql)})`).join(',\n');
  const outputs = c.outputs.map((o) => {
    const [step, column] = o.split('.');
    return `(SELECT ${column} FROM ${step}) AS "${o}"`;
  });
  const out = `(SELECT ${outputs.length > 0 ? outputs.join(', ') : '1 AS "-"'}) AS out`;
  return `WITH ${ctes}\nSELECT * FROM ${out}${c.read === undefined ? '' : ` LEFT JOIN (${c.read}) AS r ON true`}`;
}

/** What every step and the read refer to: the names the chain checks at build time. */
export function checkChain(c: GatedChain): GatedChain {
  const seen = new Set<string>();
  for (const s of c.steps) {
    for (const m of markersOf(s.sql)) if (!seen.has(m.step)) throw new Error(`chain ${c.name}: ${s.name} reads ${m.step} before it runs`);
    seen.add(s.name);
  }
  for (const o of c.outputs) if (!seen.has(o.split('.')[0] as string)) throw new Error(`chain ${c.name}: no step for output ${o}`);
  return c;
}

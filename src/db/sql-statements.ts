/**
 * Splits a migration file into its statements at the semicolons that end them: not inside
 * comments, quoted strings or identifiers, or dollar-quoted bodies. Citus needs the statements one
 * by one (it forwards some DDL, such as ADD CONSTRAINT, to its workers as the text it was given,
 * and a text of several statements is refused there), so the migrator sends them that way on
 * every server.
 */
export function splitStatements(script: string): string[] {
  const statements: string[] = [];
  let start = 0;
  let i = 0;
  const push = (end: number) => {
    const text = script.slice(start, end).trim();
    // A piece that is only comments is not a statement.
    if (text.replace(/--[^\n]*/g, '').replace(/\/\*[\s\S]*?\*\//g, '').trim() !== '') statements.push(text);
  };
  while (i < script.length) {
    const char = script[i]!;
    const next = script[i + 1];
    if (char === '-' && next === '-') {
      const end = script.indexOf('\n', i);
      i = end === -1 ? script.length : end + 1;
    } else if (char === '/' && next === '*') {
      const end = script.indexOf('*/', i + 2);
      i = end === -1 ? script.length : end + 2;
    } else if (char === "'" || char === '"') {
      // A doubled quote inside is an escaped one: the scan simply leaves and re-enters.
      const end = script.indexOf(char, i + 1);
      i = end === -1 ? script.length : end + 1;
    } else if (char === '$') {
      const tag = /^\$([A-Za-z_][A-Za-z0-9_]*)?\$/.exec(script.slice(i));
      if (tag) {
        const end = script.indexOf(tag[0], i + tag[0].length);
        i = end === -1 ? script.length : end + tag[0].length;
      } else i += 1;
    } else if (char === ';') {
      push(i);
      i += 1;
      start = i;
    } else i += 1;
  }
  push(script.length);
  return statements;
}

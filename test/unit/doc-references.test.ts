/**
 * References to the decision log and the docs pages resolve: every `docs/decisions/<topic>.md` named
 * in code, tests, scripts or docs exists, and a heading quoted right after it ("…, "Heading"") is
 * the start of one of that file's headings; every relative Markdown link of the README and the
 * docs pages names a file that exists. The decision log is found by topic, so a reference that
 * outlives its heading would send a reader nowhere.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The `## ` headings of a Markdown file, without the date suffix " (YYYY-MM-DD)". */
function headingsOf(markdown: string): string[] {
  return [...markdown.matchAll(/^#{1,4} (.+)$/gm)].map((match) => match[1]!.replace(/ \(\d{4}-\d\d-\d\d\)$/, ''));
}

/** Text before an ellipsis, without a trailing comma, colon or space: what a shortened quote promises. */
function quotedPrefix(quote: string): string {
  return quote.split('…')[0]!.replace(/[\s,:;]+$/, '');
}

/**
 * Dangling references in one text: decision files that do not exist, and quoted headings that
 * start no heading of their file. `read` gives a decision file's text, or undefined when it is missing.
 */
export function danglingDecisionReferences(text: string, read: (topic: string) => string | undefined): string[] {
  const found: string[] = [];
  if (/docs\/decisions\.md/.test(text)) found.push('docs/decisions.md (the log is by topic: docs/decisions/<topic>.md)');
  // A quote may be wrapped over a comment's continuation (" * ", "// ").
  const joined = text.replace(/\n\s*(?:\*|\/\/|--|#)?\s*/g, ' ');
  for (const match of joined.matchAll(/docs\/decisions\/([a-z0-9-]+)\.md(?:,? "([^"]+)")?/g)) {
    const topic = match[1]!;
    if (topic === 'README') continue;
    const file = read(topic);
    if (file === undefined) {
      found.push(`docs/decisions/${topic}.md does not exist`);
      continue;
    }
    if (match[2] !== undefined) {
      const prefix = quotedPrefix(match[2]);
      if (prefix.length > 0 && !headingsOf(file).some((heading) => heading.startsWith(prefix))) {
        found.push(`docs/decisions/${topic}.md has no heading starting "${prefix}"`);
      }
    }
  }
  return found;
}

function filesUnder(dir: string, keep: (path: string) => boolean): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(ROOT, dir))) {
    const path = join(dir, name);
    if (statSync(join(ROOT, path)).isDirectory()) out.push(...filesUnder(path, keep));
    else if (keep(path)) out.push(path);
  }
  return out;
}

const readTopic = (topic: string): string | undefined => {
  const path = join(ROOT, 'docs', 'decisions', `${topic}.md`);
  return existsSync(path) ? readFileSync(path, 'utf8') : undefined;
};

describe('references to the decision log and the docs', () => {
  it('the checker finds a missing file, a heading that is not there, and the old single file', () => {
    const file = '# T\n\n## Small accounts share a batch (2026-11-23)\n';
    const read = (topic: string) => (topic === 'citus' ? file : undefined);
    expect(danglingDecisionReferences('see docs/decisions/citus.md, "Small accounts share a batch"', read)).toEqual([]);
    expect(danglingDecisionReferences('see docs/decisions/citus.md, "Small accounts …"', read)).toEqual([]);
    expect(danglingDecisionReferences('// see docs/decisions/citus.md, "Small accounts\n  // share a batch"', read)).toEqual([]);
    expect(danglingDecisionReferences('see docs/decisions/citus.md, "Large accounts"', read)).toEqual(['docs/decisions/citus.md has no heading starting "Large accounts"']);
    expect(danglingDecisionReferences('see docs/decisions/holds.md', read)).toEqual(['docs/decisions/holds.md does not exist']);
    expect(danglingDecisionReferences('see docs/decisions.md, "Issue 18"', read)).toHaveLength(1);
  });

  it('every decision reference in code, tests, scripts and docs resolves', () => {
    const sources = [
      ...['src', 'test', 'scripts', 'jobs', 'docs'].flatMap((dir) => filesUnder(dir, (path) => /\.(ts|mjs|js|md|json|sql)$/.test(path) && !path.endsWith('doc-references.test.ts'))),
      'README.md',
      'eslint.config.js',
    ];
    const dangling = sources.flatMap((path) => danglingDecisionReferences(readFileSync(join(ROOT, path), 'utf8'), readTopic).map((problem) => `${path}: ${problem}`));
    expect(dangling).toEqual([]);
  });

  it('every relative link of the README and the docs pages names a file that exists', () => {
    const pages = ['README.md', ...filesUnder('docs', (path) => path.endsWith('.md'))];
    const broken: string[] = [];
    for (const page of pages) {
      for (const match of readFileSync(join(ROOT, page), 'utf8').matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = match[1]!.split('#')[0]!;
        if (target === '' || /^[a-z]+:/.test(target)) continue;
        const path = join(ROOT, dirname(page), target);
        if (!existsSync(path)) broken.push(`${page}: ${relative(ROOT, path)}`);
      }
    }
    expect(broken).toEqual([]);
  });
});

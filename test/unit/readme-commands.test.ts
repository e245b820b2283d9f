/**
 * The README's commands run the checkout's own CLI, never a package looked up on the registry:
 * `npx kessai` in a checkout where the bin is not linked asks the registry for a package named
 * `kessai`, and would run whatever was published under that name.
 */
import { accessSync, constants, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Every line of a fenced code block, and every inline `code`, of a Markdown file. */
function commandsOf(markdown: string): string[] {
  const fenced = [...markdown.matchAll(/```[a-z]*\n([\s\S]*?)```/g)].flatMap((match) => match[1]!.split('\n'));
  const inline = [...markdown.replace(/```[\s\S]*?```/g, '').matchAll(/`([^`\n]+)`/g)].map((match) => match[1]!);
  return [...fenced, ...inline];
}

describe('README and docs commands', () => {
  const files = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((name) => name.endsWith('.md')).map((name) => join('docs', name))];

  it('never run kessai through npx; the main command runs the checkout\'s bin', () => {
    for (const file of files) {
      const offending = commandsOf(readFileSync(join(ROOT, file), 'utf8')).filter((command) => /\bnpx\s+kessai\b/.test(command));
      expect(offending, file).toEqual([]);
    }
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    expect(readme).toMatch(/npm ci && \.\/bin\/kessai\.mjs simulate --scenario scripts\/scenarios\/saas\.json/);
  });

  it('the bin the README names is the package\'s bin and is executable', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { bin: Record<string, string>; scripts: Record<string, string> };
    expect(pkg.bin.kessai).toBe('./bin/kessai.mjs');
    expect(() => accessSync(join(ROOT, 'bin', 'kessai.mjs'), constants.X_OK)).not.toThrow();
    expect(pkg.scripts.kessai).toMatch(/src\/cli\/main\.ts/);
  });
});

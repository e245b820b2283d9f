/**
 * The output folder of `kessai simulate`, written so that a run never destroys what it did not
 * write:
 * - the new results are written into a fresh staging folder beside the target (same file system,
 *   so moving them in is a rename) and moved in only when complete: an interrupted or failed run
 *   leaves the previous complete results as they were;
 * - a folder written by kessai carries a marker file listing what kessai wrote there; a non-empty
 *   folder without the marker is refused (`--out .` in a checkout), and files the user added to a
 *   previous output (notes, a spreadsheet) are kept;
 * - only the entries the previous run listed in its marker are replaced or removed.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';

/** The marker file: its presence says the folder is a kessai simulation's output. */
export const OUTPUT_MARKER = '.kessai-simulation.json';

/** A folder the simulation must not write into; the message names the folder and what to do. */
export class OutputFolderError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OutputFolderError';
  }
}

interface Marker {
  readonly written_by: 'kessai simulate';
  /** The folder's top-level entries this run wrote (files, and the what-if's `variant/` folder). */
  readonly entries: readonly string[];
}

/** The entries a previous run wrote, or null when the folder is not a kessai output. */
function previousEntries(target: string): string[] | null {
  const file = join(target, OUTPUT_MARKER);
  if (!existsSync(file)) return null;
  try {
    const marker = JSON.parse(readFileSync(file, 'utf8')) as Partial<Marker>;
    if (marker.written_by === 'kessai simulate' && Array.isArray(marker.entries) && marker.entries.every((entry) => typeof entry === 'string' && basename(entry) === entry)) {
      return marker.entries;
    }
  } catch {
    // An unreadable marker is no marker.
  }
  throw new OutputFolderError(`--out ${target}: ${OUTPUT_MARKER} is not a marker kessai wrote; remove the folder or choose another with --out`);
}

/**
 * Refuses a target the run must not write into: a file, or a non-empty folder that is not a
 * previous kessai output. Returns the entries the previous run wrote (empty for a new folder).
 */
export function checkOutputFolder(target: string): readonly string[] {
  if (!existsSync(target)) return [];
  if (!statSync(target).isDirectory()) throw new OutputFolderError(`--out ${target}: not a folder`);
  const previous = previousEntries(target);
  if (previous !== null) return previous;
  if (readdirSync(target).length > 0) {
    throw new OutputFolderError(
      `--out ${target}: the folder is not empty and was not written by kessai simulate (no ${OUTPUT_MARKER}); nothing was written. Choose a new or empty folder with --out`,
    );
  }
  return [];
}

/** A staging folder beside the target, moved in by commit() or removed by abandon(). */
export interface OutputFolder {
  /** Where this run writes its results. */
  readonly dir: string;
  /** Moves the complete results into the target, replacing only what the previous run wrote. */
  commit(): void;
  /** Removes the staging folder (a failed or interrupted run); the target is untouched. */
  abandon(): void;
}

export function openOutputFolder(out: string): OutputFolder {
  const target = resolve(out);
  checkOutputFolder(target);
  mkdirSync(dirname(target), { recursive: true });
  const dir = mkdtempSync(join(dirname(target), `.${basename(target)}.partial-`));
  let done = false;
  return {
    dir,
    commit() {
      if (done) throw new Error('output folder already committed or abandoned');
      // Checked again: the folder may have changed while the simulation ran.
      const previous = checkOutputFolder(target);
      const entries = readdirSync(dir).sort();
      mkdirSync(target, { recursive: true });
      const clash = entries.find((entry) => !previous.includes(entry) && existsSync(join(target, entry)));
      if (clash !== undefined) {
        throw new OutputFolderError(`--out ${target}: ${clash} is in the way and was not written by kessai simulate; move it away and run again`);
      }
      const marker: Marker = { written_by: 'kessai simulate', entries };
      writeFileSync(join(dir, OUTPUT_MARKER), `${JSON.stringify(marker, null, 2)}\n`);
      // What the previous run wrote goes aside first, then the new entries are renamed in, the
      // marker last; what the previous run wrote and this one did not is removed.
      const aside = mkdtempSync(join(dirname(target), `.${basename(target)}.previous-`));
      for (const entry of previous) if (existsSync(join(target, entry))) renameSync(join(target, entry), join(aside, entry));
      for (const entry of [...entries, OUTPUT_MARKER]) renameSync(join(dir, entry), join(target, entry));
      rmSync(aside, { recursive: true, force: true });
      rmSync(dir, { recursive: true, force: true });
      done = true;
    },
    abandon() {
      if (done) return;
      rmSync(dir, { recursive: true, force: true });
      done = true;
    },
  };
}

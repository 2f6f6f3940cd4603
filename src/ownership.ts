import { lstatSync, lchownSync, mkdirSync, statSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';

/**
 * Files and folders a root-run command (`sudo botlink token`) creates in the state or log folder
 * belong to that folder's owner: a root-owned file there locks out the daemon's own user.
 * Outside root nothing changes: a file a user creates is theirs and already in their folder.
 */
function runsAsRoot(): boolean {
  return process.geteuid?.() === 0;
}

/** Gives `path` (just created by this process) the owner and group of the folder holding it, when run as root. */
export function giveToFolderOwner(path: string): void {
  if (!runsAsRoot()) return;
  const folder = statSync(dirname(path));
  const own = lstatSync(path);
  if (own.uid !== folder.uid || own.gid !== folder.gid) lchownSync(path, folder.uid, folder.gid);
}

/** `mkdir -p` whose new folders each take the owner of the folder they were made in, when run as root. */
export function makeFolders(dir: string, mode: number): void {
  const first = mkdirSync(dir, { recursive: true, mode });
  if (first === undefined || !runsAsRoot()) return;
  let path = first;
  giveToFolderOwner(path);
  for (const part of relative(first, dir).split(sep).filter(Boolean)) {
    path = join(path, part);
    giveToFolderOwner(path);
  }
}

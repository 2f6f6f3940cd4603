import { readFileSync, statSync } from 'node:fs';

/** The group owning the socket file, by name when /etc/group knows it: the group a user must join to use it. */
export function socketGroupName(path: string, groupFile = '/etc/group'): string {
  let gid: number;
  try {
    gid = statSync(path).gid;
  } catch {
    return 'botlink'; // the folder is closed to us too: the installed daemon's group
  }
  try {
    for (const line of readFileSync(groupFile, 'utf8').split('\n')) {
      const [name, , id] = line.split(':');
      if (name && Number(id) === gid) return name;
    }
  } catch {
    // no group database: the number still names it
  }
  return String(gid);
}

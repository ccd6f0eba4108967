// Records the hash of the sources this build came from (service/console/assets.py computes the
// same hash; a test fails when the committed build is older than its sources).
import { createHash } from "node:crypto";
import { readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const roots = ["src", "index.html", "package.json", "package-lock.json", "vite.config.js"];

function walk(path) {
  const info = statSync(path, { throwIfNoEntry: false });
  if (!info) return [];
  if (info.isFile()) return [path];
  return readdirSync(path).flatMap((name) => walk(join(path, name)));
}

const rel = (p) => relative(root, p).split(sep).join("/");
const files = roots.flatMap((name) => walk(join(root, name)));
// Sort by UTF-8 bytes of the relative path, as Python sorts str (code points) for ASCII names.
files.sort((a, b) => (rel(a) < rel(b) ? -1 : rel(a) > rel(b) ? 1 : 0));
const digest = createHash("sha256");
for (const file of files) {
  digest.update(Buffer.concat([Buffer.from(rel(file)), Buffer.from([0])]));
  digest.update(Buffer.concat([readFileSync(file), Buffer.from([0])]));
}
const out = join(root, "..", "static", "build-info.json");
writeFileSync(out, JSON.stringify({ sourcesHash: digest.digest("hex") }, null, 2) + "\n");
console.log(`stamped ${out}`);

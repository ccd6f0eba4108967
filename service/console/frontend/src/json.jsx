// A syntax-highlighted JSON view whose nodes carry their JSON pointer (data-path), with each
// problem ({code, path, message}) shown at its path, or at the nearest existing ancestor when
// the path names a field that is missing.
const escape = (key) => String(key).replace(/~/g, "~0").replace(/\//g, "~1");
const unescape = (part) => part.replace(/~1/g, "/").replace(/~0/g, "~");

function has(value, key) {
  if (Array.isArray(value)) return /^\d+$/.test(key) && Number(key) < value.length;
  return value !== null && typeof value === "object" && Object.hasOwn(value, key);
}

// Where a problem is shown: its path if it exists in `root` (which sits at `base`), else the
// longest existing prefix.
export function anchorOf(path, root, base) {
  if (!path.startsWith(base)) return base;
  const parts = path.slice(base.length).split("/").filter(Boolean).map(unescape);
  let node = root;
  let anchor = base;
  for (const part of parts) {
    if (!has(node, part)) break;
    node = node[part];
    anchor = `${anchor}/${escape(part)}`;
  }
  return anchor;
}

function Problems({ list }) {
  if (!list || !list.length) return null;
  return list.map((p) => (
    <span class="problem" data-path={p.path} title={p.path}>
      {" "}⚠ {p.path}: {p.message} <code>({p.code})</code>
    </span>
  ));
}

function Scalar({ value }) {
  if (value === null) return <span class="j-null">null</span>;
  if (typeof value === "string") return <span class="j-str">{JSON.stringify(value)}</span>;
  if (typeof value === "number") return <span class="j-num">{String(value)}</span>;
  if (typeof value === "boolean") return <span class="j-bool">{String(value)}</span>;
  return <span>{String(value)}</span>;
}

function Node({ value, path, depth, byPath, comma }) {
  const problems = byPath.get(path);
  const cls = problems ? "j-node has-problem" : "j-node";
  const pad = "  ".repeat(depth);
  const tail = comma ? "," : "";
  if (value === null || typeof value !== "object") {
    return (
      <span class={cls} data-path={path}>
        <Scalar value={value} />
        {tail}
        <Problems list={problems} />
      </span>
    );
  }
  const isArray = Array.isArray(value);
  const entries = isArray ? value.map((v, i) => [i, v]) : Object.entries(value);
  const [open, close] = isArray ? ["[", "]"] : ["{", "}"];
  if (!entries.length) {
    return (
      <span class={cls} data-path={path}>
        {open}
        {close}
        {tail}
        <Problems list={problems} />
      </span>
    );
  }
  return (
    <span class={cls} data-path={path}>
      {open}
      <Problems list={problems} />
      {"\n"}
      {entries.map(([key, child], i) => (
        <>
          {pad}
          {"  "}
          {!isArray && (
            <>
              <span class="j-key">{JSON.stringify(key)}</span>
              {": "}
            </>
          )}
          <Node
            value={child}
            path={`${path}/${escape(key)}`}
            depth={depth + 1}
            byPath={byPath}
            comma={i < entries.length - 1}
          />
          {"\n"}
        </>
      ))}
      {pad}
      {close}
      {tail}
    </span>
  );
}

export function JsonView({ value, base = "", problems = [], testid }) {
  const byPath = new Map();
  for (const problem of problems) {
    const anchor = anchorOf(problem.path || "", value, base);
    byPath.set(anchor, [...(byPath.get(anchor) || []), problem]);
  }
  return (
    <pre class="json" data-testid={testid}>
      <Node value={value} path={base} depth={0} byPath={byPath} comma={false} />
    </pre>
  );
}

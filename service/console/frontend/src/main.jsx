import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { getKey, onKeyChange, setKey } from "./api.js";
import { Login } from "./pages/login.jsx";
import { Processors } from "./pages/processors.jsx";
import { Processor } from "./pages/processor.jsx";
import { Dlq } from "./pages/dlq.jsx";
import { Create } from "./pages/create.jsx";
import { Connections } from "./pages/connections.jsx";
import "./style.css";

// Hash routes (#/processors/NAME ...): the server only has to serve "/".
function useRoute() {
  const read = () => (location.hash.replace(/^#/, "") || "/").split("/").filter(Boolean);
  const [route, setRoute] = useState(read());
  useEffect(() => {
    const update = () => setRoute(read());
    addEventListener("hashchange", update);
    return () => removeEventListener("hashchange", update);
  }, []);
  return route.map(decodeURIComponent);
}

function Page({ route }) {
  const [head, name] = route;
  if (head === "processors" && name) return <Processor name={name} />;
  if (head === "dlq") return <Dlq name={name} />;
  if (head === "create") return <Create />;
  if (head === "connections") return <Connections />;
  return <Processors />;
}

function App() {
  const [key, setCurrent] = useState(getKey());
  const route = useRoute();
  useEffect(() => onKeyChange(setCurrent), []);
  if (!key) return <Login />;
  const at = route[0] || "processors";
  const link = (href, label, id) => (
    <a href={`#/${href}`} class={at === href ? "active" : ""} data-testid={`nav-${id}`}>
      {label}
    </a>
  );
  return (
    <>
      <header>
        <strong>Sluice</strong>
        <nav>
          {link("processors", "Processors", "processors")}
          {link("dlq", "DLQ", "dlq")}
          {link("create", "Create processor", "create")}
          {link("connections", "Connections", "connections")}
        </nav>
        <button class="link" data-testid="logout" onClick={() => setKey(null)}>
          Log out
        </button>
      </header>
      <main>
        <Page route={route} />
      </main>
    </>
  );
}

render(<App />, document.getElementById("app"));

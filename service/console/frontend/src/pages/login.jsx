import { useState } from "preact/hooks";
import { api, setKey } from "../api.js";

// The key is checked once against the API, then kept in sessionStorage for this tab only.
export function Login() {
  const [key, setValue] = useState("");
  const [error, setError] = useState(null);
  const submit = async (event) => {
    event.preventDefault();
    try {
      await api("/processors", { query: { itemsPerPage: 1 }, key });
      setKey(key);
    } catch (e) {
      setError(e.status === 401 ? "That key was refused." : `Cannot reach the service: ${e.message}`);
    }
  };
  return (
    <form class="login" onSubmit={submit}>
      <h1>Sluice console</h1>
      <p>
        The API key is in the service's data directory (<code>api_key</code>) or in{" "}
        <code>SLUICE_API_KEYS</code>. It stays in this tab's session storage.
      </p>
      <input
        type="password"
        name="apiKey"
        placeholder="API key"
        autocomplete="off"
        value={key}
        onInput={(e) => setValue(e.target.value)}
        data-testid="login-key"
      />
      <button type="submit" data-testid="login-submit">Log in</button>
      {error && <p class="error" data-testid="login-error">{error}</p>}
    </form>
  );
}

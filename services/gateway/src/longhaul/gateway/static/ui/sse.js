// Follows a server-sent event stream with fetch() (so the API key can go in a header) and
// resumes after a dropped connection from the last event id, as EventSource would.
import { authHeaders } from "./api.js";

// ``from``: the stream sequence already seen (e.g. the event_id of a view just loaded).
export function follow(path, onEvent, onError, onOpen, from) {
  const abort = new AbortController();
  let lastEventId = from || 0;
  (async () => {
    while (!abort.signal.aborted) {
      try {
        const response = await fetch(path, {
          headers: authHeaders({ "Last-Event-ID": String(lastEventId) }), signal: abort.signal,
        });
        if (!response.ok) throw new Error("event stream: HTTP " + response.status);
        if (onOpen) onOpen();
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let cut;
          while ((cut = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, cut);
            buffer = buffer.slice(cut + 2);
            let name = "message", data = "", id = null;
            for (const line of block.split("\n")) {
              if (line.startsWith("event: ")) name = line.slice(7);
              else if (line.startsWith("data: ")) data += line.slice(6);
              else if (line.startsWith("id: ")) id = line.slice(4);
            }
            if (id) lastEventId = Number(id);
            if (data) onEvent(name, data);
          }
        }
      } catch (err) {
        if (abort.signal.aborted) return;
        if (onError) onError(err);
      }
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  })();
  return () => abort.abort();
}

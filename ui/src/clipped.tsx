/**
 * A long text shown by its head and tail (core/clip-text.ts), with a note in place of what was cut and a button that
 * shows all of it: a tool's 100,000 lines of output used to go into the page whole, and into every frame's render
 * while its turn ran. Controls in it are shown, never obeyed (core/visible-controls.ts).
 */
import { useMemo, useState } from "preact/hooks";
import { clipText, cutNote } from "../../src/core/clip-text.js";
import { visibleControls } from "../../src/core/visible-controls.js";

export function Clipped({ text, tag = "pre", class: cls }: { text: string; tag?: "pre" | "div"; class?: string }) {
  const [all, setAll] = useState(false);
  const c = useMemo(() => clipText(text), [text]);
  const shown = useMemo(() => (c.cut && !all ? null : visibleControls(text)), [c, all]);
  const Tag = tag;
  if (shown !== null) return <Tag class={cls}>{shown}</Tag>;
  return (
    <>
      <Tag class={cls}>
        {visibleControls(c.head)}
        <span class="cut" role="note">
          … {cutNote(c.cut!)} …
        </span>
        {visibleControls(c.tail)}
      </Tag>
      <button type="button" class="show-all" onClick={() => setAll(true)}>
        Show all
      </button>
    </>
  );
}

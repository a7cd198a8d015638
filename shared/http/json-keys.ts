/**
 * Names an object of a JSON text holds twice. JSON.parse keeps a repeated name's last value and another
 * reader may keep its first (RFC 8259 section 4 leaves it to the reader), so such a text means different
 * things to different readers: a transaction whose `amount` is given twice, or a wallet reply whose
 * `status` is. Names are compared as decoded (`"st\u0061tus"` is `status`). The text must be valid JSON
 * (already parsed).
 */

/**
 * The first name some object of `text` holds twice, or undefined; with `topLevel`, only those names of
 * the top-level object count. A text with no backslash in which each of `topLevel`'s quoted forms occurs
 * at most once is answered without a scan (every well-formed wallet reply).
 */
export function repeatedName(text: string, topLevel?: readonly string[]): string | undefined {
  if (topLevel && !text.includes('\\') && topLevel.every((n) => text.indexOf(`"${n}"`) === text.lastIndexOf(`"${n}"`))) return undefined;
  const wanted = topLevel ? new Set(topLevel) : undefined;
  // One entry per open bracket: the names seen so far in an object, null for an array.
  const open: Array<Set<string> | null> = [];
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      const start = i;
      let escaped = false;
      for (i++; i < text.length && text.charCodeAt(i) !== 0x22; i++) {
        if (text.charCodeAt(i) === 0x5c /* \ */) {
          escaped = true;
          i++;
        }
      }
      const names = open.at(-1);
      if (!names) continue;
      let j = i + 1;
      while (j < text.length && (text[j] === ' ' || text[j] === '\t' || text[j] === '\n' || text[j] === '\r')) j++;
      if (text[j] !== ':') continue;
      if (wanted && open.length !== 1) continue;
      const name = escaped ? (JSON.parse(text.slice(start, i + 1)) as string) : text.slice(start + 1, i);
      if (wanted && !wanted.has(name)) continue;
      if (names.has(name)) return name;
      names.add(name);
    } else if (c === 0x7b /* { */) open.push(new Set());
    else if (c === 0x5b /* [ */) open.push(null);
    else if (c === 0x7d /* } */ || c === 0x5d /* ] */) open.pop();
  }
  return undefined;
}

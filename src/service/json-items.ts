// A JSON array read as it arrives: each element is parsed on its own and handed over, so a listing of ten
// thousand connectors is never held as one text, one parsed array, or one copy of either. The service's lists
// have no paging (GET /api/v1/sources/ takes only `source_type`), so this is what keeps a listing's cost to one
// element at a time.
import { StringDecoder } from 'node:string_decoder';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const JSON_SPACE = /^[ \t\n\r]*$/;

/**
 * What the body turned out to be: a JSON array (its elements went to the callback), another JSON value or
 * something else (kept whole in `text`, for the caller to report as it reports any answer it cannot use), or an
 * array that broke off or went wrong part way (`invalid`).
 */
export type JsonArrayOutcome = { kind: 'array'; count: number } | { kind: 'other'; text: string } | { kind: 'invalid' };

export class JsonArrayReader {
  readonly #decoder = new StringDecoder('utf8');
  readonly #onItem: (value: unknown, index: number) => void;
  #mode: 'start' | 'items' | 'after' | 'other' | 'invalid' = 'start';
  /** Nesting inside the current element. */
  #depth = 0;
  #inString = false;
  #escaped = false;
  /** The current element's text from earlier chunks. */
  #carry = '';
  #count = 0;
  #other = '';
  /** What `onItem` threw, which ends the reading. */
  #error: unknown;
  #failed = false;

  /** `onItem` gets each element parsed; should it throw, reading stops and `end` throws the same error. */
  constructor(onItem: (value: unknown, index: number) => void) {
    this.#onItem = onItem;
  }

  write(chunk: Buffer): void {
    this.#scan(this.#decoder.write(chunk));
  }

  end(): JsonArrayOutcome {
    this.#scan(this.#decoder.end());
    if (this.#failed) throw this.#error;
    switch (this.#mode) {
      case 'after':
        return { kind: 'array', count: this.#count };
      case 'other':
        return { kind: 'other', text: this.#other };
      case 'start':
        return { kind: 'other', text: '' };
      default:
        return { kind: 'invalid' };
    }
  }

  #scan(text: string): void {
    if (text === '' || this.#failed) return;
    let i = 0;
    switch (this.#mode) {
      case 'other':
        this.#other += text;
        return;
      case 'invalid':
        return;
      case 'after':
        if (!JSON_SPACE.test(text)) this.#mode = 'invalid';
        return;
      case 'start': {
        while (i < text.length && ' \t\n\r'.includes(text[i] as string)) i++;
        if (i === text.length) return;
        if (text.charCodeAt(i) !== OPEN_BRACKET) {
          this.#mode = 'other';
          this.#other = text.slice(i);
          return;
        }
        this.#mode = 'items';
        i++;
        break;
      }
      default:
        break;
    }
    let start = i;
    for (; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (this.#inString) {
        if (this.#escaped) this.#escaped = false;
        else if (c === BACKSLASH) this.#escaped = true;
        else if (c === QUOTE) this.#inString = false;
        continue;
      }
      if (c === QUOTE) this.#inString = true;
      else if (c === OPEN_BRACE || c === OPEN_BRACKET) this.#depth++;
      else if (c === CLOSE_BRACE || (c === CLOSE_BRACKET && this.#depth > 0)) {
        if (--this.#depth < 0) {
          this.#mode = 'invalid';
          return;
        }
      } else if (this.#depth === 0 && (c === COMMA || c === CLOSE_BRACKET)) {
        const element = this.#carry + text.slice(start, i);
        this.#carry = '';
        start = i + 1;
        if (!this.#element(element, c === CLOSE_BRACKET)) return;
        if (c === CLOSE_BRACKET) {
          this.#mode = JSON_SPACE.test(text.slice(i + 1)) ? 'after' : 'invalid';
          return;
        }
      }
    }
    this.#carry += text.slice(start);
  }

  /** Parses one element and hands it over; false when reading stops. */
  #element(raw: string, closing: boolean): boolean {
    const text = raw.trim();
    if (text === '') {
      // `[]` is an empty list; `[,` and `[1,]` are not JSON.
      if (closing && this.#count === 0) return true;
      this.#mode = 'invalid';
      return false;
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      this.#mode = 'invalid';
      return false;
    }
    try {
      this.#onItem(value, this.#count++);
    } catch (error) {
      this.#failed = true;
      this.#error = error;
      return false;
    }
    return true;
  }
}

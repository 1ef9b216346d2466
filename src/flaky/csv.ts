/**
 * RFC 4180 CSV for the quarantine export and import: fields quoted when they hold a comma, a quote, CR or LF (quotes
 * doubled); the reader takes LF or CRLF line ends and quoted fields over several lines. Small and pure: see
 * docs/decisions.md ("Flaky: CSV without a library").
 */

const needsQuotes = /[",\r\n]/

export const csvField = (value: string): string => (needsQuotes.test(value) ? `"${value.replace(/"/g, '""')}"` : value)

/** Rows to CSV text, CRLF line ends (RFC 4180), a header row first. */
export const toCsv = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string =>
  `${[header, ...rows].map((row) => row.map(csvField).join(",")).join("\r\n")}\r\n`

export class CsvError extends Error {
  constructor(
    readonly line: number,
    message: string
  ) {
    super(message)
  }
}

/** CSV text to rows of fields; blank lines are skipped. Throws `CsvError` for an unterminated quoted field. */
export const parseCsv = (text: string): string[][] => {
  const rows: string[][] = []
  let row: string[] = []
  let field = ""
  let quoted = false
  let line = 1
  let startLine = 1
  let i = text.charCodeAt(0) === 0xfeff ? 1 : 0
  const endRow = () => {
    row.push(field)
    field = ""
    if (!(row.length === 1 && row[0] === "")) rows.push(row)
    row = []
  }
  for (; i < text.length; i++) {
    const c = text[i]
    if (quoted) {
      if (c === '"') {
        if (text[i + 1] === '"') {
          field += '"'
          i++
        } else quoted = false
      } else {
        if (c === "\n") line++
        field += c
      }
      continue
    }
    if (c === '"' && field === "") {
      quoted = true
      startLine = line
    } else if (c === ",") {
      row.push(field)
      field = ""
    } else if (c === "\n") {
      endRow()
      line++
    } else if (c === "\r") {
      if (text[i + 1] !== "\n") {
        endRow()
        line++
      }
    } else field += c
  }
  if (quoted) throw new CsvError(startLine, `line ${startLine}: a quoted field is not closed`)
  if (field !== "" || row.length > 0) endRow()
  return rows
}

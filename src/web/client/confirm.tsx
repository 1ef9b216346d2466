import type { ComponentChildren } from "preact"
import { useRef } from "preact/hooks"

/**
 * A button that asks first (issue #33): it opens a modal dialog (the browser's `<dialog>`: focus kept inside, Escape
 * closes it) saying what will happen, with "Keep as is" and the confirming button; only that one acts. Generic: any
 * page's action can use it, with its own question and, where there is one, what the action would change.
 */
export const ConfirmButton = ({
  label,
  confirmLabel,
  disabled,
  onConfirm,
  children
}: {
  /** the button's text */
  readonly label: string
  /** the confirming button's text (default "Yes, <label, lower case>") */
  readonly confirmLabel?: string
  readonly disabled?: boolean
  readonly onConfirm: () => void
  /** the question, and what the action would change */
  readonly children: ComponentChildren
}) => {
  const dialog = useRef<HTMLDialogElement>(null)
  return (
    <>
      <button type="button" disabled={disabled} onClick={() => dialog.current?.showModal()}>
        {label}
      </button>
      <dialog ref={dialog} class="confirm" aria-label={label}>
        <div class="confirm-body">{children}</div>
        <p class="actions">
          <button type="button" onClick={() => dialog.current?.close()}>
            Keep as is
          </button>
          <button
            type="button"
            class="confirm-yes"
            onClick={() => {
              dialog.current?.close()
              onConfirm()
            }}
          >
            {confirmLabel ?? `Yes, ${label.toLowerCase()}`}
          </button>
        </p>
      </dialog>
    </>
  )
}

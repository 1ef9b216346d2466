/** `upload` lives with the CI client now (src/client/upload.ts); this name stays for older imports. */
export { expandFiles, runUpload, UPLOAD_USAGE, type UploadIo } from "../client/upload.ts"

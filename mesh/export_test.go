package mesh

// RawCommand builds a command of any type, for tests of forward
// compatibility (a type this version does not know).
func RawCommand(typ CommandType, body []byte) Command { return Command{typ: typ, body: body} }

package resp

import (
	"time"
)

// isHTTPInput reports whether a command name is a line of HTTP: a request line starting with POST, or a
// Host: header. A web page can make a browser send such a request to the RESP port with a body of RESP
// commands, so, as Redis does, the endpoint closes the connection on either before anything else runs.
func isHTTPInput(name []byte) bool {
	return isSubcommand(name, "post") || isSubcommand(name, "host:")
}

// httpAlarmEvery bounds how often the warning about HTTP input is logged.
const httpAlarmEvery = time.Minute

// refuseHTTP closes the connection at once, dropping replies not sent yet, and logs a warning at most once
// a minute.
func (c *respConn) refuseHTTP() {
	c.quit, c.hangUp = true, true
	now := time.Now().UnixNano()
	last := c.srv.lastAlarm.Load()
	if now-last >= int64(httpAlarmEvery) && c.srv.lastAlarm.CompareAndSwap(last, now) {
		c.srv.log.Warn("possible security attack: HTTP input (POST or Host:) on the RESP port; connection closed",
			"remote", c.conn.RemoteAddr().String())
	}
}

package cluster

import "testing"

// The values are redis-server 7's CLUSTER KEYSLOT replies.
func TestKeySlot(t *testing.T) {
	for _, c := range []struct {
		key  string
		slot int
	}{
		{"foo", 12182},
		{"123456789", 12739}, // CRC16-XMODEM check value 0x31C3
		{"{user1000}.following", 3443},
		{"{user1000}.followers", 3443},
		{"user1000", 3443},
		{"foo{}{bar}", 8363},    // empty first tag: the whole key
		{"foo{{bar}}zap", 4015}, // tag is "{bar"
		{"foo{bar}{zap}", 5061}, // first tag only: "bar"
		{"bar", 5061},
		{"{", 4092},
		{"", 0},
	} {
		if got := KeySlot([]byte(c.key)); got != c.slot {
			t.Errorf("KeySlot(%q) = %d, want %d", c.key, got, c.slot)
		}
	}
}
